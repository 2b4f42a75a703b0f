#include "core/internal/text.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "core/internal/advertised_host.h"

namespace orrery::text {

bool IsPrintableToken(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string EscapeControl(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

namespace {
// Length of the valid UTF-8 sequence starting at s[i], or 0 when none starts there
// (overlong forms, surrogates and code points above U+10FFFF are invalid, as in JSON).
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return n;
}
}  // namespace

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string EscapeUtf8(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

Status CheckAdvertisedHost(std::string_view host) {
  std::string h(host);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("'" + EscapeControl(h) + "' " + why);
  };
  if (h.empty()) return Status::InvalidArgument("an empty address cannot be advertised");
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    if (v4.s_addr == 0) return bad("binds every address; advertise one that peers can dial");
    return Status::Ok();
  }
  std::string bare =
      h.size() > 2 && h.front() == '[' && h.back() == ']' ? h.substr(1, h.size() - 2) : h;
  if (inet_pton(AF_INET6, bare.c_str(), &v6) == 1)
    return bad("is an IPv6 address: not supported (the daemons' sockets speak IPv4 only)");
  if (std::all_of(h.begin(), h.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; }))
    return bad("is not a valid IPv4 address (four numbers 0-255 separated by dots)");
  if (h.size() > 253) return bad("is longer than a host name may be (253 bytes)");
  size_t start = 0;
  while (start <= h.size()) {
    size_t end = h.find('.', start);
    if (end == std::string::npos) end = h.size();
    std::string_view label = std::string_view(h).substr(start, end - start);
    bool chars_ok = std::all_of(label.begin(), label.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
    });
    if (label.empty() || label.size() > 63 || !chars_ok || label.front() == '-' ||
        label.back() == '-')
      return bad(
          "is neither an IPv4 address nor a host name (labels of letters, digits and '-', "
          "1 to 63 characters, separated by dots)");
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace orrery::text
