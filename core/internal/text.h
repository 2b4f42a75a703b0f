// Checks and escapes for text that came from a peer, a file or Redis and is shown to people
// or used as a name (docs/security.md "Untrusted input").
#pragma once

#include <string>
#include <string_view>

namespace orrery::text {

// Whether every byte is printable ASCII other than space (0x21..0x7e): tokens, addresses.
bool IsPrintableToken(std::string_view s);

// `s` with every control byte (below 0x20 except tab, and 0x7f) written as \xNN, so that
// text from elsewhere cannot move a terminal's cursor, clear its screen or forge lines.
// Bytes from 0x80 up pass as they are (UTF-8).
std::string EscapeControl(std::string_view s);

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF,
// as JSON wants).
bool IsUtf8(std::string_view s);
// `s` with every byte that is not part of a valid UTF-8 sequence written as \xNN: what
// records, logs and errors keep of text from elsewhere.
std::string EscapeUtf8(std::string_view s);

}  // namespace orrery::text
