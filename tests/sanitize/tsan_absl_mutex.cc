// Makes Debian's (uninstrumented) absl::Mutex visible to ThreadSanitizer.
// Linked into every executable of a BERTH_SANITIZE=thread build only.
//
// Without it TSan sees no synchronization in absl::Mutex (atomics and futex
// calls inside libabsl_synchronization.so) and reports every access guarded
// by one as a race. Each public locking entry point is defined here (the
// executable's definition interposes the shared library's for berth, gRPC
// and absl alike), annotated as an abseil built with TSan would annotate it,
// and forwarded to the library's own definition (dlsym RTLD_NEXT). Waits
// (Await, CondVar::Wait) are an unlock before and a lock after; whatever
// absl runs in between, condition callbacks included, is inside TSan's
// ignore region, as with the real annotations. The *WithTimeout forms are
// the *WithDeadline ones here: the library's call those through the PLT,
// which would annotate twice.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#define BERTH_STR2(x) #x
#define BERTH_STR(x) BERTH_STR2(x)

namespace {

// The library's definition of an absl::<cls>::<member> from its mangled
// tail, e.g. Real("5Mutex4LockEv").
void* Real(const char* tail) {
  const char* ns = BERTH_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string("_ZN4absl") + std::to_string(std::strlen(ns)) + ns + tail;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found\n", name.c_str());
    std::abort();
  }
  return f;
}

template <typename F>
F Fn(const char* tail) {
  return reinterpret_cast<F>(Real(tail));
}

void Released(void* m, unsigned flags) { __tsan_mutex_pre_unlock(m, flags); }
void Reacquired(void* m, unsigned flags) {
  __tsan_mutex_post_unlock(m, flags);
  __tsan_mutex_pre_lock(m, flags);
  __tsan_mutex_post_lock(m, flags, 0);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using Cond = const Condition&;

// Not annotated as a destroy: TSan treats that as a write to the mutex, and
// gRPC frees mutexes after handing them between threads through refcounts
// it cannot see (its own false positive, with no berth frame). Freed heap
// memory drops TSan's state for the mutex anyway.
Mutex::~Mutex() {
  static auto real = Fn<void (*)(Mutex*)>("5MutexD2Ev");
  real(this);
}

void Mutex::Lock() {
  static auto real = Fn<void (*)(Mutex*)>("5Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static auto real = Fn<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static auto real = Fn<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

void Mutex::ReaderLock() {
  static auto real = Fn<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  static auto real = Fn<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  static auto real = Fn<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, __tsan_mutex_try_read_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::LockWhen(Cond cond) {
  static auto real = Fn<void (*)(Mutex*, Cond)>("5Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(Cond cond) {
  static auto real = Fn<void (*)(Mutex*, Cond)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::LockWhenWithTimeout(Cond cond, Duration timeout) {
  return LockWhenWithDeadline(cond, Now() + timeout);
}

bool Mutex::ReaderLockWhenWithTimeout(Cond cond, Duration timeout) {
  return ReaderLockWhenWithDeadline(cond, Now() + timeout);
}

bool Mutex::LockWhenWithDeadline(Cond cond, Time deadline) {
  static auto real =
      Fn<bool (*)(Mutex*, Cond, Time)>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(Cond cond, Time deadline) {
  static auto real = Fn<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

// Await may be called with the lock held in either mode; absl keeps the mode.
// TSan is told of an exclusive hold, which is what berth uses.
void Mutex::Await(Cond cond) {
  static auto real = Fn<void (*)(Mutex*, Cond)>("5Mutex5AwaitERKNS0_9ConditionE");
  Released(this, 0);
  real(this, cond);
  Reacquired(this, 0);
}

bool Mutex::AwaitWithTimeout(Cond cond, Duration timeout) {
  return AwaitWithDeadline(cond, Now() + timeout);
}

bool Mutex::AwaitWithDeadline(Cond cond, Time deadline) {
  static auto real =
      Fn<bool (*)(Mutex*, Cond, Time)>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Released(this, 0);
  const bool met = real(this, cond, deadline);
  Reacquired(this, 0);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static auto real = Fn<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Released(mu, 0);
  real(this, mu);
  Reacquired(mu, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  return WaitWithDeadline(mu, Now() + timeout);
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real =
      Fn<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Released(mu, 0);
  const bool timed_out = real(this, mu, deadline);
  Reacquired(mu, 0);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl
