// Telling ThreadSanitizer of a hand-off between threads that it cannot see.
//
// ZeroMQ hands a frame from the sending thread to its I/O thread, which frees it once it is
// sent (FreeBlock in transport_send.cc). Debian's libzmq is not built with ThreadSanitizer,
// so TSan cannot see that hand-off; these two calls tell it (the sender releases the block,
// FreeBlock acquires it), so that a real race in FreeBlock would still be reported.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define ORRERY_TSAN_HANDOFF 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORRERY_TSAN_HANDOFF 1
#endif
#endif

#ifdef ORRERY_TSAN_HANDOFF
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace orrery::transport {

#ifdef ORRERY_TSAN_HANDOFF
inline void HandOver(void* p) { __tsan_release(p); }
inline void TakeOver(void* p) { __tsan_acquire(p); }
#else
inline void HandOver(void*) {}
inline void TakeOver(void*) {}
#endif

}  // namespace orrery::transport
