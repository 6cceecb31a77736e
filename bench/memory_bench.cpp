// Memory backend throughput against a plain mutex-and-hash-map baseline doing the same logical work
// in the same run. Prints a table; never used as a timed test.
//
//   lease cycle: acquire + release of one resource's lease (baseline: the same rules on a locked
//   map) commit:      one-key read-modify-write in a session, per isolation mode (baseline: lock,
//   read the
//                JSON value and its version, write value+1 with version+1, unlock)
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <statepact/statepact.hpp>

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

double baseline_commits(int n) {
  struct Entry {
    sp::Value value;
    std::uint64_t version = 0;
  };
  std::mutex mu;
  std::unordered_map<std::string, std::unordered_map<std::string, Entry>> state;
  state["sku-1"]["stock"] = Entry{sp::Value(0), 0};
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::lock_guard g(mu);
    auto& e = state["sku-1"]["stock"];
    e.value = e.value.get<int>() + 1;
    ++e.version;
  }
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::stoi(argv[1]) : 300000;
  struct Row {
    std::string op;
    double ours, base;
  };
  std::vector<Row> rows;
  auto rate = [n](double s) { return n / s; };
  rows.push_back({"lease acquire+release", rate(timed([&] { return lease_cycles(n); })),
                  rate(baseline_lease_cycles(n))});
  const double base_commit = rate(baseline_commits(n));
  for (auto mode : {sp::Isolation::none, sp::Isolation::optimistic, sp::Isolation::snapshot,
                    sp::Isolation::serializable, sp::Isolation::pessimistic})
    rows.push_back({fmt::format("1-key commit, {}", sp::to_string(mode)),
                    rate(timed([&] { return commits(n, mode); })), base_commit});
  std::printf(
      "memory backend, one thread, %d operations each (baseline: mutex + hash map, same run)\n\n",
      n);
  std::printf("  %-30s %14s %14s %10s\n", "operation", "statepact/s", "baseline/s", "base/ours");
  std::printf("  %-30s %14s %14s %10s\n", std::string(30, '-').c_str(), "------------",
              "------------", "--------");
  for (const auto& r : rows)
    std::printf("  %-30s %14.0f %14.0f %9.1fx\n", r.op.c_str(), r.ours, r.base, r.base / r.ours);
  return 0;
}
