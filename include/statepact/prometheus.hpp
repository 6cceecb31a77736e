/// @file
/// statepact::prometheus: an Observer that turns the library's events into Prometheus counters and
/// latency histograms (prometheus-cpp). Link the `statepact::prometheus` target.
///
/// Labels never carry a resource, key, owner or agent name: those are unbounded, and every distinct
/// value would become a time series. Events are labelled by what happened (event, outcome, reason,
/// lock mode) and by the constant labels the caller gives (say, {"backend", "redis"}).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

#include <statepact/errors.hpp>
#include <statepact/observer.hpp>

namespace statepact {

/// An Observer that counts lease events, commits, retries and lock waits and records their
/// latencies (seconds, measured on the steady clock) in a prometheus::Registry. Every series
/// exists from construction, at zero. Safe to call from several threads at once (prometheus-cpp's
/// counters and histograms are). Must outlive the Manager, LeaseManager or Session it is set on.
class PrometheusObserver final : public Observer {
 public:
  /// Latency buckets in seconds: 100 µs (an in-process commit) to 10 s (a long lock wait).
  static std::vector<double> default_buckets() {
    return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
            0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  }

  /// Registers the metrics in `registry` (which must outlive this observer) with `labels` added to
  /// every series, e.g. {{"backend", "postgres"}}, and `buckets` (seconds) for every histogram.
  /// Several observers may share a registry: with different labels they add series to the same
  /// families; with equal labels they share them.
  /// @throws InvalidArgumentError for a bad label name, one this observer sets itself (event,
  /// outcome, reason, mode), or anything else prometheus-cpp refuses to register.
  explicit PrometheusObserver(prometheus::Registry& registry, prometheus::Labels labels = {},
                              std::vector<double> buckets = default_buckets()) {
    for (const char* own : {"event", "outcome", "reason", "mode"})
      if (labels.count(own))
        throw InvalidArgumentError(
            fmt::format("label '{}' is set by statepact's Prometheus observer itself", own));
    try {
      auto& lease_count = prometheus::BuildCounter()
                              .Name("statepact_lease_events_total")
                              .Help("Lease events by kind")
                              .Register(registry);
      auto& lease_time = prometheus::BuildHistogram()
                             .Name("statepact_lease_operation_duration_seconds")
                             .Help("Time the lease operation behind each event took, in seconds")
                             .Register(registry);
      for (std::size_t i = 0; i < lease_.size(); ++i) {
        auto l = with(labels, "event", to_string(static_cast<LeaseEvent>(i)));
        lease_[i] = {&lease_count.Add(l), &lease_time.Add(l, buckets)};
      }

      auto& commit_count = prometheus::BuildCounter()
                               .Name("statepact_commits_total")
                               .Help("Commits (and resends of commits) by outcome")
                               .Register(registry);
      auto& commit_time = prometheus::BuildHistogram()
                              .Name("statepact_commit_duration_seconds")
                              .Help("Commit latency by outcome, in seconds")
                              .Register(registry);
      for (std::size_t i = 0; i < commit_.size(); ++i) {
        auto l = with(labels, "outcome", to_string(static_cast<CommitOutcome>(i)));
        commit_[i] = {&commit_count.Add(l), &commit_time.Add(l, buckets)};
      }

      auto& retry_count =
          prometheus::BuildCounter()
              .Name("statepact_retries_total")
              .Help("Transactions run again, or commits resent, by the error before")
              .Register(registry);
      // Only retryable errors cause retries: the other codes get no series.
      for (ErrorCode c : {ErrorCode::conflict, ErrorCode::deadlock, ErrorCode::lock_timeout,
                          ErrorCode::backend_unavailable, ErrorCode::commit_unknown})
        retry_[static_cast<std::size_t>(c)] =
            &retry_count.Add(with(labels, "reason", to_string(c)));
      retry_backoff_ = &prometheus::BuildHistogram()
                            .Name("statepact_retry_backoff_seconds")
                            .Help("The wait before each retry, in seconds")
                            .Register(registry)
                            .Add(labels, buckets);

      auto& lock_count = prometheus::BuildCounter()
                             .Name("statepact_lock_waits_total")
                             .Help("Pessimistic lock requests by mode and outcome")
                             .Register(registry);
      auto& lock_time =
          prometheus::BuildHistogram()
              .Name("statepact_lock_wait_duration_seconds")
              .Help("Time until a pessimistic lock was granted or refused, in seconds")
              .Register(registry);
      for (std::size_t m = 0; m < 2; ++m)
        for (std::size_t o = 0; o < lock_[m].size(); ++o) {
          auto l = with(with(labels, "mode", to_string(static_cast<LockMode>(m))), "outcome",
                        to_string(static_cast<LockOutcome>(o)));
          lock_[m][o] = {&lock_count.Add(l), &lock_time.Add(l, buckets)};
        }
    } catch (const std::exception& e) {
      // prometheus-cpp refuses bad names and clashing families with std:: exceptions.
      throw InvalidArgumentError(fmt::format("cannot register statepact metrics: {}", e.what()));
    }
  }

  /// Counts the lease event by kind (`statepact_lease_events_total`) and records its duration
  /// (`statepact_lease_operation_duration_seconds`).
  void on_lease(const LeaseEventInfo& e) override {
    record(lease_.at(static_cast<std::size_t>(e.event)), e.duration);
  }
  /// Counts the commit by outcome (`statepact_commits_total`) and records its duration
  /// (`statepact_commit_duration_seconds`).
  void on_commit(const CommitEventInfo& e) override {
    record(commit_.at(static_cast<std::size_t>(e.outcome)), e.duration);
  }
  /// Counts the retry by the error code before it (`statepact_retries_total`; only retryable
  /// codes have a series) and records its backoff (`statepact_retry_backoff_seconds`).
  void on_retry(const RetryEventInfo& e) override {
    if (auto* c = retry_.at(static_cast<std::size_t>(e.reason))) c->Increment();
    retry_backoff_->Observe(std::chrono::duration<double>(e.backoff).count());
  }
  /// Counts the lock request by mode and outcome (`statepact_lock_waits_total`) and records the
  /// time until it was granted or refused (`statepact_lock_wait_duration_seconds`).
  void on_lock_wait(const LockWaitInfo& e) override {
    record(lock_.at(static_cast<std::size_t>(e.mode)).at(static_cast<std::size_t>(e.outcome)),
           e.duration);
  }

 private:
  // Every series exists from the start (a zero is a fact worth scraping), and an event only
  // indexes an array: no label lookup, no lock beyond prometheus-cpp's own.
  struct Pair {
    prometheus::Counter* count = nullptr;
    prometheus::Histogram* time = nullptr;
  };

  static void record(const Pair& p, steady_duration d) {
    p.count->Increment();
    p.time->Observe(std::chrono::duration<double>(d).count());
  }

  static prometheus::Labels with(prometheus::Labels l, const char* name, const char* value) {
    l.emplace(name, value);
    return l;
  }

  std::array<Pair, static_cast<std::size_t>(LeaseEvent::revoked) + 1> lease_{};
  std::array<Pair, static_cast<std::size_t>(CommitOutcome::failed) + 1> commit_{};
  std::array<prometheus::Counter*, static_cast<std::size_t>(ErrorCode::configuration) + 1> retry_{};
  prometheus::Histogram* retry_backoff_ = nullptr;
  std::array<std::array<Pair, static_cast<std::size_t>(LockOutcome::failed) + 1>, 2> lock_{};
};

}  // namespace statepact
