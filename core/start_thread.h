// StartThread: starts a std::thread and reports a refusal as a Status.
//
// std::thread's constructor throws std::system_error when the system will
// not start another thread (EAGAIN at a task or memory limit). No exception
// may leave the library, so every thread the library starts goes through
// here, and a refusal becomes kUnavailable naming what the thread was for;
// the caller undoes what it had started and returns that Status.
//
// Thread-safety: as std::thread's constructor; `*thread` is the caller's.

#ifndef EVENTFOLD_CORE_START_THREAD_H_
#define EVENTFOLD_CORE_START_THREAD_H_

#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "eventfold/status.h"

namespace eventfold {

// On success `*thread` runs `fn` (it must not be running a thread already)
// and the result is OK; on failure `*thread` is left as it was and the
// result is kUnavailable: "cannot start <what>'s thread: <reason>".
template <typename Fn>
[[nodiscard]] Status StartThread(std::thread* thread, std::string_view what, Fn&& fn) {
  try {
    *thread = std::thread(std::forward<Fn>(fn));
    return Status::OK();
  } catch (const std::system_error& e) {
    return Status::Unavailable("cannot start " + std::string(what) + "'s thread: " + e.what());
  }
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_START_THREAD_H_
