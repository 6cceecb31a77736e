// Known operations on the memory backend produce the expected counter values and histogram counts,
// read back from a Prometheus registry; and no resource or owner name becomes a label.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include <prometheus/registry.h>

#include <statepact/prometheus.hpp>
#include <statepact/statepact.hpp>
#include <statepact/testing/manual_clock.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

// The one series of `family` whose labels include all of `want`; nullopt if none (or several).
std::optional<prometheus::ClientMetric> series(const std::vector<prometheus::MetricFamily>& all,
                                               const std::string& family,
                                               const prometheus::Labels& want) {
  std::optional<prometheus::ClientMetric> found;
  for (const auto& f : all) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      std::size_t matched = 0;
      for (const auto& l : m.label)
        if (auto w = want.find(l.name); w != want.end() && w->second == l.value) ++matched;
      if (matched != want.size()) continue;
      if (found) return std::nullopt;
      found = m;
    }
  }
  return found;
}

double counter(const std::vector<prometheus::MetricFamily>& all, const std::string& family,
               const prometheus::Labels& want) {
  auto m = series(all, family, want);
  if (!m) FAIL("no single series " << family << " with the wanted labels");
  return m->counter.value;
}

std::uint64_t histogram_count(const std::vector<prometheus::MetricFamily>& all,
                              const std::string& family, const prometheus::Labels& want) {
  auto m = series(all, family, want);
  if (!m) FAIL("no single series " << family << " with the wanted labels");
  return m->histogram.sample_count;
}

}  // namespace

TEST_CASE("prometheus: known operations give known counter values", "[prometheus]") {
  sp::testing::ManualClock clock;
  sp::MemoryBackend backend(sp::MemoryOptions().clock(clock.source()));
  prometheus::Registry registry;
  sp::PrometheusObserver metrics(registry, {{"backend", "memory"}});
  sp::Manager manager(backend);
  manager.set_observer(&metrics);
  sp::LeaseManager leases(backend, 30s);
  leases.set_observer(&metrics);

  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto a = co_await manager.lease("job-secret-1", "owner-secret", 1s);
    co_await leases.hold("job-secret-2", "owner-secret",
                         [](const sp::Lease&) -> asio::awaitable<void> { co_return; });
    auto busy = co_await sp::test::thrown<sp::LeaseNotAvailableError>(
        [&] { return leases.acquire("job-secret-1", "owner-2"); });
    CHECK(busy);
    for (int i = 0; i < 3; ++i) {
      auto s = co_await manager.session(sp::SessionOptions("agent").resource("job-secret-1"));
      co_await s.write("n", i);
      co_await s.commit();
    }
    clock.advance(2s);
    co_await manager.lease("job-secret-1", "owner-2", 1s);
    auto stale =
        co_await manager.session(sp::SessionOptions("agent").resource("job-secret-1").fence(a));
    co_await stale.write("n", 99);
    auto fenced = co_await sp::test::thrown<sp::LeaseLostError>([&] { return stale.commit(); });
    CHECK(fenced);
  });

  const auto all = registry.Collect();
  const prometheus::Labels mem{{"backend", "memory"}};
  auto with = [&](const char* k, const char* v) {
    auto l = mem;
    l.emplace(k, v);
    return l;
  };
  CHECK(counter(all, "statepact_lease_events_total", with("event", "acquired")) == 3);
  CHECK(counter(all, "statepact_lease_events_total", with("event", "not_available")) == 1);
  CHECK(counter(all, "statepact_lease_events_total", with("event", "released")) == 1);
  CHECK(counter(all, "statepact_lease_events_total", with("event", "lost")) == 0);
  CHECK(counter(all, "statepact_lease_events_total", with("event", "revoked")) == 0);
  CHECK(histogram_count(all, "statepact_lease_operation_duration_seconds",
                        with("event", "acquired")) == 3);
  CHECK(counter(all, "statepact_commits_total", with("outcome", "applied")) == 3);
  CHECK(counter(all, "statepact_commits_total", with("outcome", "fenced_off")) == 1);
  CHECK(counter(all, "statepact_commits_total", with("outcome", "conflict")) == 0);
  CHECK(histogram_count(all, "statepact_commit_duration_seconds", with("outcome", "applied")) == 3);
  CHECK(counter(all, "statepact_retries_total", with("reason", "conflict")) == 0);

  // Resource and owner names stay out of the labels, whatever the series.
  for (const auto& f : all)
    for (const auto& m : f.metric)
      for (const auto& l : m.label) {
        INFO(f.name << " " << l.name << "=" << l.value);
        CHECK(l.name != "resource");
        CHECK(l.value.find("secret") == std::string::npos);
      }
}

TEST_CASE("prometheus: observers share a registry by label, and their own label names are refused",
          "[prometheus]") {
  prometheus::Registry registry;
  sp::PrometheusObserver memory(registry, {{"backend", "memory"}});
  sp::PrometheusObserver other(registry, {{"backend", "other"}});
  memory.on_commit(sp::CommitEventInfo{sp::CommitOutcome::conflict, "a", 1, 1, false, 2ms});
  other.on_commit(sp::CommitEventInfo{sp::CommitOutcome::conflict, "a", 1, 1, false, 2ms});
  other.on_commit(sp::CommitEventInfo{sp::CommitOutcome::conflict, "a", 1, 1, false, 2ms});
  const auto all = registry.Collect();
  CHECK(counter(all, "statepact_commits_total", {{"backend", "memory"}, {"outcome", "conflict"}}) ==
        1);
  CHECK(counter(all, "statepact_commits_total", {{"backend", "other"}, {"outcome", "conflict"}}) ==
        2);
  CHECK_THROWS_AS(sp::PrometheusObserver(registry, {{"outcome", "x"}}), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PrometheusObserver(registry, {{"bad-name", "x"}}), sp::InvalidArgumentError);
}
