// Memory backend throughput against a plain mutex-and-hash-map baseline doing the same logical work
// in the same run. Prints a table; never used as a timed test.
//
// - lease cycle: acquire + release of one resource's lease; the baseline applies the same rules to
//   a locked map.
// - commit: a one-key read-modify-write session per isolation mode. The baseline for the
//   validating modes copies value and version out under the lock and writes back under the lock if
//   the version is unchanged; for pessimistic it holds the lock across the read-modify-write.
//
// Usage: statepact_bench_memory [operations per run, default 300000] [runs, default 5]; each row
// shows the median run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <statepact/statepact.hpp>

#include "median.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs the awaitable to completion on a fresh single-threaded io_context.
template <class F>
double timed(F make) {
  asio::io_context io(1);
  double elapsed = 0;
  asio::co_spawn(io, make(), [&](std::exception_ptr e, double s) {
    if (e) std::rethrow_exception(e);
    elapsed = s;
  });
  io.run();
  return elapsed;
}

asio::awaitable<double> lease_cycles(int n) {
  sp::MemoryBackend backend;
  const std::string resource = "job-42", owner = "worker-a";
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto lease = co_await backend.acquire_lease(resource, owner, 30s);
    co_await backend.release_lease(std::move(lease));
  }
  co_return seconds_since(t0);
}

double baseline_lease_cycles(int n) {
  struct State {
    std::uint64_t high_water = 0, token = 0;
    std::string owner;
    sp::time_point expires{};
  };
  std::mutex mu;
  std::unordered_map<std::string, State> leases;
  const std::string resource = "job-42", owner = "worker-a";
  volatile std::uint64_t sink = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    {
      std::lock_guard g(mu);
      auto& s = leases[resource];
      const auto now = sp::Clock::now();
      if (s.token != 0 && now < s.expires && s.owner != owner) throw std::runtime_error("busy");
      s.token = ++s.high_water;
      s.owner = owner;
      s.expires = now + 30s;
      sink = s.token;
    }
    {
      std::lock_guard g(mu);
      auto& s = leases[resource];
      if (s.token == sink && s.owner == owner) s.token = 0;
    }
  }
  return seconds_since(t0);
}

asio::awaitable<double> commits(int n, sp::Isolation mode) {
  sp::MemoryBackend backend;
  sp::Manager<sp::MemoryBackend> manager(backend);
  co_await manager.register_resource("sku-1", sp::Value::parse(R"({"stock": 0})"));
  const auto options = sp::SessionOptions("agent").resource("sku-1").isolation(mode);
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto s = co_await manager.session(options);
    auto v = co_await s.read_for_update("stock");
    co_await s.write("stock", v->get<int>() + 1);
    co_await s.commit();
  }
  const double elapsed = seconds_since(t0);
  if ((co_await backend.read("sku-1", "stock")).value->get<int>() != n)
    throw std::runtime_error("benchmark lost updates");
  co_return elapsed;
}

struct BaselineEntry {
  sp::Value value;
  std::uint64_t version = 0;
};
using BaselineState =
    std::unordered_map<std::string, std::unordered_map<std::string, BaselineEntry>>;

// What a team would write by hand for an agent's read-modify-write: copy the value and its version
// out under the lock, compute without it, then write back under the lock if the version is
// unchanged.
double baseline_validated_commits(int n) {
  std::mutex mu;
  BaselineState state;
  const std::string resource = "sku-1", key = "stock";
  state[resource][key] = BaselineEntry{sp::Value(0), 0};
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    sp::Value seen;
    std::uint64_t seen_version;
    {
      std::lock_guard g(mu);
      const auto& e = state.at(resource).at(key);
      seen = e.value;
      seen_version = e.version;
    }
    sp::Value next = seen.get<int>() + 1;
    std::lock_guard g(mu);
    auto& e = state.at(resource).at(key);
    if (e.version != seen_version) throw std::runtime_error("conflict");
    e.value = std::move(next);
    ++e.version;
  }
  if (state.at(resource).at(key).value.get<int>() != n)
    throw std::runtime_error("baseline lost updates");
  return seconds_since(t0);
}

// The floor any awaitable API pays: a one-key transaction is four co_awaits (session, read, write,
// commit), measured here on coroutines that do nothing.
asio::awaitable<int> nothing(int x) {
  co_return x + 1;
}

asio::awaitable<double> four_empty_awaits(int n) {
  int sink = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    sink = co_await nothing(sink);
    sink = co_await nothing(sink);
    sink = co_await nothing(sink);
    sink = co_await nothing(sink);
  }
  const double elapsed = seconds_since(t0);
  if (sink != 4 * n) throw std::runtime_error("floor loop skipped work");
  co_return elapsed;
}

// The pessimistic equivalent: hold the lock across the read-modify-write.
double baseline_locked_commits(int n) {
  std::mutex mu;
  BaselineState state;
  const std::string resource = "sku-1", key = "stock";
  state[resource][key] = BaselineEntry{sp::Value(0), 0};
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::lock_guard g(mu);
    auto& e = state.at(resource).at(key);
    e.value = e.value.get<int>() + 1;
    ++e.version;
  }
  if (state.at(resource).at(key).value.get<int>() != n)
    throw std::runtime_error("baseline lost updates");
  return seconds_since(t0);
}

// Operations per second of the median of `rounds` runs of `once` (which returns seconds).
template <class F>
double median_rate(int n, int rounds, F once) {
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) rates.push_back(n / once());
  return statepact::bench::median_by(std::move(rates), [](double r) { return r; });
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::stoi(argv[1]) : 300000;
  const int rounds = argc > 2 ? std::max(1, std::stoi(argv[2])) : 5;
  struct Row {
    std::string op;
    double ours, base;
  };
  std::vector<Row> rows;
  rows.push_back({"lease acquire+release",
                  median_rate(n, rounds, [&] { return timed([&] { return lease_cycles(n); }); }),
                  median_rate(n, rounds, [&] { return baseline_lease_cycles(n); })});
  const double validated = median_rate(n, rounds, [&] { return baseline_validated_commits(n); });
  const double locked = median_rate(n, rounds, [&] { return baseline_locked_commits(n); });
  for (auto mode : {sp::Isolation::none, sp::Isolation::optimistic, sp::Isolation::snapshot,
                    sp::Isolation::serializable, sp::Isolation::pessimistic})
    rows.push_back({fmt::format("1-key commit, {}", sp::to_string(mode)),
                    median_rate(n, rounds, [&] { return timed([&] { return commits(n, mode); }); }),
                    mode == sp::Isolation::pessimistic ? locked : validated});
  rows.push_back(
      {"floor: 4 empty co_awaits",
       median_rate(n, rounds, [&] { return timed([&] { return four_empty_awaits(n); }); }),
       validated});
  std::printf(
      "memory backend, one thread, %d operations per run, median of %d runs; baseline: mutex +\n"
      "hash map in the same run (commits: pessimistic against a lock held across the update, the\n"
      "others against a version-checked write)\n\n",
      n, rounds);
  std::printf("  %-30s %14s %14s %10s\n", "operation", "statepact/s", "baseline/s", "base/ours");
  std::printf("  %-30s %14s %14s %10s\n", std::string(30, '-').c_str(), "------------",
              "------------", "--------");
  for (const auto& r : rows)
    std::printf("  %-30s %14.0f %14.0f %9.1fx\n", r.op.c_str(), r.ours, r.base, r.base / r.ours);
  return 0;
}
