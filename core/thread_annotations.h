// Clang thread-safety annotations, and mutexes the analysis understands.
//
// With clang and -Wthread-safety, `GUARDED_BY(mu)` on a member makes every
// access without `mu` held a compile error (the `thread-safety` preset of
// CMakePresets.json builds the libraries so), `REQUIRES(mu)` on a function
// makes its callers hold `mu`, and `ACQUIRED_BEFORE`/`ACQUIRED_AFTER` record
// the lock order (checked by -Wthread-safety-beta). With other compilers the
// macros expand to nothing.
//
// libstdc++'s std::mutex and std::shared_mutex carry no capability
// attribute, so the analysis cannot see them: Mutex and SharedMutex wrap
// them, and MutexLock, ReaderLock and WriterLock are their scoped locks.
// A condition variable needs the std::mutex itself: MutexLock::native()
// hands out the std::unique_lock it holds, for std::condition_variable and
// Clock::WaitUntil (the analysis takes the lock as held across the wait,
// which is what the caller sees).
//
// Thread-safety: these are mutexes; each is as thread-safe as the standard
// one it wraps.

#ifndef EVENTFOLD_CORE_THREAD_ANNOTATIONS_H_
#define EVENTFOLD_CORE_THREAD_ANNOTATIONS_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define EVENTFOLD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define EVENTFOLD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) EVENTFOLD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY EVENTFOLD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) EVENTFOLD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) EVENTFOLD_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) EVENTFOLD_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) EVENTFOLD_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) EVENTFOLD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) EVENTFOLD_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) EVENTFOLD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) EVENTFOLD_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) EVENTFOLD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) EVENTFOLD_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) EVENTFOLD_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) EVENTFOLD_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) EVENTFOLD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) EVENTFOLD_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS EVENTFOLD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace eventfold {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // The wrapped mutex, for MutexLock.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// libstdc++'s shared_mutex prefers readers: under a steady stream of
// overlapping shared holders an exclusive lock() could wait for ever. lock()
// therefore raises a count of waiting writers while it waits, and a reader
// that must not starve a writer calls WaitForWaitingWriters() before taking
// its shared lock (not inside lock_shared(): a thread already holding the
// mutex shared may take it shared again, which a gate there would deadlock).
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  void lock() ACQUIRE() {
    waiting_writers_.fetch_add(1);
    mu_.lock();
    {
      std::lock_guard gate(gate_mu_);
      waiting_writers_.fetch_sub(1);
    }
    gate_cv_.notify_all();
  }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }
  // Returns once no lock() is waiting (at once when none is).
  void WaitForWaitingWriters() {
    if (waiting_writers_.load() == 0) return;
    std::unique_lock gate(gate_mu_);
    gate_cv_.wait(gate, [&] { return waiting_writers_.load() == 0; });
  }

 private:
  std::shared_mutex mu_;
  std::atomic<int> waiting_writers_{0};
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
};

// Holds a Mutex for its scope; Unlock/Lock let go of it and take it again
// in between. native() is the std::unique_lock a condition variable waits
// with.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : lock_(mu->native()) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// Holds a SharedMutex shared for its scope (or until Unlock).
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->lock_shared(); }
  ~ReaderLock() RELEASE() {
    if (mu_) mu_->unlock_shared();
  }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

  void Unlock() RELEASE() {
    mu_->unlock_shared();
    mu_ = nullptr;
  }

 private:
  SharedMutex* mu_;
};

// Holds a SharedMutex exclusively for its scope.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~WriterLock() RELEASE() { mu_->unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* mu_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_THREAD_ANNOTATIONS_H_
