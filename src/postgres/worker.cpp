#include "worker.hpp"

namespace statepact::detail::pg {

void JobQueue::push(std::unique_ptr<Job> job) {
  {
    std::lock_guard guard(mu_);
    if (!closed_) {
      jobs_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  job->abandon();
}

std::unique_ptr<Job> JobQueue::pop() {
  std::unique_lock guard(mu_);
  cv_.wait(guard, [&] { return closed_ || !jobs_.empty(); });
  if (jobs_.empty()) return nullptr;
  auto job = std::move(jobs_.front());
  jobs_.pop_front();
  return job;
}

void JobQueue::close() {
  std::lock_guard guard(mu_);
  closed_ = true;
  cv_.notify_all();
}

void CancelPoint::arm(pqxx::connection& conn, std::uint64_t seq) {
  std::lock_guard guard(mu_);
  conn_ = &conn;
  seq_ = seq;
}

void CancelPoint::disarm() {
  std::lock_guard guard(mu_);
  conn_ = nullptr;
}

void CancelPoint::cancel(std::uint64_t seq) noexcept {
  std::lock_guard guard(mu_);
  if (!conn_ || seq_ != seq) return;
  cancelled_ = seq;
  try {
    // PQcancel: a separate short connection to the server, safe while the owner thread waits.
    conn_->cancel_query();
  } catch (...) {
  }
}

bool CancelPoint::cancelled(std::uint64_t seq) const {
  std::lock_guard guard(mu_);
  return cancelled_ == seq;
}

Worker::Worker(std::shared_ptr<JobQueue> queue, std::shared_ptr<Shared> shared)
    : queue_(std::move(queue)), shared_(std::move(shared)) {
  thread_ = std::thread([q = queue_, s = shared_] {
    // The connection lives and dies on this thread, like everything libpqxx.
    Link link(s);
    while (auto job = q->pop()) job->run(link);
  });
}

Worker::~Worker() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace statepact::detail::pg
