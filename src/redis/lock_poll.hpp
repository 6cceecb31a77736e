// A Redis lock wait's decisions, without I/O. Redis cannot block a script, so a lock that others
// hold is polled: after each "wait" answer the waiter holds a place in the key's queue, records
// whom it waits for (the deadlock check), then sleeps a jittered, doubling backoff, until it is
// granted, refused, or its deadline passes. Whatever ends the wait, a recorded waiter must remove
// its record, and one that leaves without the lock must give up its place in the queue.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>

#include <statepact/detail/verdicts.hpp>

namespace statepact::detail {

class LockPoll {
 public:
  using clock = std::chrono::steady_clock;
  using duration = clock::duration;

  // A waiter's record outlives a few polls, so a crashed waiter stops counting soon.
  static constexpr std::chrono::milliseconds wait_record_ttl{2000};
  static constexpr std::chrono::milliseconds first_backoff{2}, max_backoff{20};

  LockPoll(clock::time_point deadline, unsigned seed) : deadline_(deadline), rng_(seed) {}

  // A lock script call is on its way. The script may take a place in the queue before its answer
  // comes back, so until an answer says otherwise the place counts as taken: a lost answer (a
  // dropped connection, a timeout, a cancelled wait) must not leave a place nobody gives up, which
  // would hold every later request to the key behind a waiter that has gone.
  void on_lock_sent() { queued_ = true; }

  // The lock script's verdict. True: the wait is over (granted, or refused for good); false:
  // others hold it or queued first, so record the wait (the wait script) and poll again.
  bool on_lock(Verdict v) {
    // A grant took the place out of the queue in the same script; a 'wait' (re)took it.
    queued_ = v == Verdict::wait;
    if (v != Verdict::wait) return true;
    recorded_ = true;
    return false;
  }

  // The wait script's verdict. True: waiting would close a cycle (a deadlock); the script removed
  // the record then.
  bool on_wait(Verdict v) {
    if (v != Verdict::deadlock) return false;
    recorded_ = false;
    return true;
  }

  // How long to sleep before the next try; nothing once the deadline has passed (a timeout).
  std::optional<duration> next_delay(clock::time_point now) {
    if (now >= deadline_) return std::nullopt;
    // Jittered so two pollers do not keep meeting at the same instant.
    std::uniform_int_distribution<long> jitter(backoff_.count() / 2, backoff_.count());
    const duration delay =
        std::min<duration>(std::chrono::milliseconds(jitter(rng_)), deadline_ - now);
    backoff_ = std::min(backoff_ * 2, max_backoff);
    return delay;
  }

  // Whether this waiter's record is in the wait-for graph and must be removed when it stops
  // waiting (granted, timed out, cancelled, failed).
  bool recorded() const { return recorded_; }

  // Whether this waiter holds a place in the key's queue that it must give up because it stops
  // waiting without the lock (timed out, deadlocked, cancelled, failed); until then later
  // requests queue behind it.
  bool queued() const { return queued_; }

 private:
  clock::time_point deadline_;
  std::minstd_rand rng_;
  std::chrono::milliseconds backoff_ = first_backoff;
  bool recorded_ = false;
  bool queued_ = false;
};

}  // namespace statepact::detail
