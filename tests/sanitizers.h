// Whether this translation unit is built with a sanitizer (core/internal/sanitizers.h). Tests
// size their loads and memory bounds by it: a sanitized process is several times heavier, and
// ASan keeps freed memory in quarantine.
#pragma once

#include "core/internal/sanitizers.h"

namespace orrery_test {

inline constexpr bool kAddressSanitizer = orrery::kAddressSanitizer;
inline constexpr bool kThreadSanitizer = orrery::kThreadSanitizer;
inline constexpr bool kSanitized = orrery::kSanitized;

}  // namespace orrery_test
