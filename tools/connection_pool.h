// ConnectionPool: the task queue of the HTTP server, which never queues a
// connection behind busy workers.
//
// cpp-httplib serves each connection, for as long as the client keeps it
// alive, as one task of its TaskQueue. Its own ThreadPool queues tasks
// without bound once every worker holds a connection: a new sender would
// wait, unanswered, until some other client hangs up. This pool hands a task
// to an idle worker, or else runs it on a short-lived thread of its own
// marked as overflow (RunningOverflow()), whose requests the server answers
// 429 with "Connection: close" at once — the sender retries later, as it
// does for any 429.
//
// Thread-safe: httplib enqueues from its accept thread; shutdown() joins
// every thread, workers after their queued tasks.

#ifndef EVENTFOLD_TOOLS_CONNECTION_POOL_H_
#define EVENTFOLD_TOOLS_CONNECTION_POOL_H_

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace eventfold::cli {

class ConnectionPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(size_t workers);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> task) override;
  void shutdown() override;

  // True on a thread serving an overflow connection.
  static bool RunningOverflow();

 private:
  struct Overflow {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void Work();
  // Joins overflow threads that have finished; mu_ held.
  void ReapOverflow();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  // Workers neither serving a connection nor promised one: counted at
  // enqueue, not when a thread gets to wait, so a worker still starting up
  // counts as free.
  size_t free_;
  bool shutdown_ = false;
  std::vector<std::thread> workers_;
  std::list<Overflow> overflow_;
};

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_CONNECTION_POOL_H_
