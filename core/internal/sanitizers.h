// Whether this translation unit is built with a sanitizer (gcc defines __SANITIZE_*__, clang
// answers __has_feature): code that must behave differently under one (fresh_memory.cc does
// not touch a vector's room ahead under AddressSanitizer) and tests that size their loads by
// it (tests/sanitizers.h) ask here.
#pragma once

#if defined(__has_feature)
#define ORRERY_HAS_FEATURE(feature) __has_feature(feature)
#else
#define ORRERY_HAS_FEATURE(feature) 0
#endif

namespace orrery {

#if defined(__SANITIZE_ADDRESS__) || ORRERY_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__) || ORRERY_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

inline constexpr bool kSanitized = kAddressSanitizer || kThreadSanitizer;

}  // namespace orrery
