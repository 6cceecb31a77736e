// Threads that own connections, fed by job queues. The pool's threads share one queue, so a free
// connection takes the next statement; a pessimistic session's thread has a queue of its own, so
// its statements run in order on its transaction's connection.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "connection.hpp"

namespace statepact::detail::pg {

class Job {
 public:
  virtual ~Job() = default;
  // Runs on the worker thread; must not throw.
  virtual void run(Link& link) noexcept = 0;
  // The queue is closed: complete without running.
  virtual void abandon() noexcept = 0;
};

class JobQueue {
 public:
  void push(std::unique_ptr<Job> job);
  // Blocks for the next job; null once the queue is closed and drained.
  std::unique_ptr<Job> pop();
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> jobs_;
  bool closed_ = false;
};

// Lets another thread cancel the statement a session thread is running (a lock wait), and only
// that one: `seq` names the job, so a late cancel never hits a later statement's job.
class CancelPoint {
 public:
  void arm(pqxx::connection& conn, std::uint64_t seq);
  void disarm();
  void cancel(std::uint64_t seq) noexcept;
  bool cancelled(std::uint64_t seq) const;

 private:
  mutable std::mutex mu_;
  pqxx::connection* conn_ = nullptr;
  std::uint64_t seq_ = 0;
  std::uint64_t cancelled_ = 0;
};

// Arms a CancelPoint for one statement for as long as it lives, so every way out of the statement
// (its answer, an exception) disarms it.
class ArmedCancel {
 public:
  ArmedCancel(CancelPoint& point, pqxx::connection& conn, std::uint64_t seq) : point_(point) {
    point_.arm(conn, seq);
  }
  ~ArmedCancel() { point_.disarm(); }
  ArmedCancel(const ArmedCancel&) = delete;
  ArmedCancel& operator=(const ArmedCancel&) = delete;

 private:
  CancelPoint& point_;
};

class Worker {
 public:
  Worker(std::shared_ptr<JobQueue> queue, std::shared_ptr<Shared> shared);
  // The owner closes the queue first; this waits for the jobs left in it.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

 private:
  std::shared_ptr<JobQueue> queue_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace statepact::detail::pg
