// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html)
// and a mutex type they understand. With clang and -Wthread-safety (the CMake option
// ORRERY_THREAD_SAFETY=ON turns the warnings into errors) the compiler checks that a
// GUARDED_BY member is touched only with its mutex held; with gcc the macros expand to
// nothing and the code is the same.
//
// libstdc++'s std::mutex carries no capability attribute, so a member guarded by a
// std::mutex cannot be checked: guard it by an orrery::Mutex instead, a std::mutex with
// the annotations. Hold it with a MutexLock and wait with a CondVar (a
// std::condition_variable whose waits REQUIRE the Mutex): std::unique_lock carries no
// annotations either, so the analysis cannot tell that code under one holds the lock.
// Write a wait with a predicate as a loop, `while (!ready_) cv_.Wait(&mu_);`, so the
// predicate is checked as code that holds the lock (a lambda is analysed on its own).
//
//   class Queue {
//    public:
//     void Push(int v) EXCLUDES(mu_) { MutexLock l(&mu_); items_.push_back(v); }
//    private:
//     void DropLocked() REQUIRES(mu_);
//     Mutex mu_;
//     std::vector<int> items_ GUARDED_BY(mu_);
//   };
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define ORRERY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ORRERY_THREAD_ANNOTATION(x)  // gcc has no thread-safety analysis
#endif

// On a type: instances are capabilities (a mutex) or scoped holders of one (a lock guard).
#define CAPABILITY(x) ORRERY_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY ORRERY_THREAD_ANNOTATION(scoped_lockable)
// On a member: reading or writing it needs the capability; PT_: the pointee does.
#define GUARDED_BY(x) ORRERY_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) ORRERY_THREAD_ANNOTATION(pt_guarded_by(x))
// On a mutex member: lock ordering.
#define ACQUIRED_BEFORE(...) ORRERY_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) ORRERY_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// On a function: the caller must hold (REQUIRES) or must not hold (EXCLUDES) these.
#define REQUIRES(...) ORRERY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) ORRERY_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) ORRERY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: it acquires or releases these (held on return / not held on return).
#define ACQUIRE(...) ORRERY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) ORRERY_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) ORRERY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) ORRERY_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) ORRERY_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: asserts at run time that the capability is held (the analysis trusts it).
#define ASSERT_CAPABILITY(x) ORRERY_THREAD_ANNOTATION(assert_capability(x))
// On a function returning a reference to a capability.
#define RETURN_CAPABILITY(x) ORRERY_THREAD_ANNOTATION(lock_returned(x))
// Opts one function out of the analysis; say why next to it.
#define NO_THREAD_SAFETY_ANALYSIS ORRERY_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace orrery {

// std::mutex with capability annotations. Also a BasicLockable (lock/unlock), so
// std::condition_variable_any and std::scoped_lock work with it.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it (no run-time check: std::mutex has no owner).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}
  // The std::mutex inside, for CondVar (std::unique_lock<std::mutex> with std::adopt_lock
  // inside a MutexLock scope). Locking through it is invisible to the analysis.
  std::mutex& native() RETURN_CAPABILITY(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// std::condition_variable on an orrery::Mutex. The same waits and wake-ups as a
// std::condition_variable used with a std::unique_lock<std::mutex> (which it is inside);
// std::condition_variable_any would add a second internal mutex to every wait and notify.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` while it waits and holds it again on return; may wake spuriously.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->native(), std::adopt_lock);
    cv_.wait(l);
    l.release();  // the caller's MutexLock still owns it
  }
  // As Wait; false when it returned because `deadline` passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->native(), std::adopt_lock);
    bool woken = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace orrery
