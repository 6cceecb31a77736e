// What an observer costs: runs N one-key commit cycles (session, read, write, commit) on the memory
// backend with no observer, an observer that does nothing, or statepact::prometheus's. Meant to be
// run under callgrind by bench/observer_cost.sh, which counts instructions (repeatable, unlike
// time on a shared machine) and subtracts a short run from a long one to cancel start-up.
//
// Usage: statepact_bench_observer none|noop|prometheus CYCLES
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include <statepact/statepact.hpp>
#ifdef STATEPACT_BENCH_WITH_PROMETHEUS
#include <statepact/prometheus.hpp>
#endif

namespace sp = statepact;

namespace {

struct NoopObserver final : sp::Observer {};

asio::awaitable<void> cycles(sp::Observer* observer, int n) {
  sp::MemoryBackend backend;
  sp::Manager<sp::MemoryBackend> manager(backend);
  manager.set_observer(observer);
  co_await manager.register_resource("counter", sp::Value::parse(R"({"n": 0})"));
  for (int i = 0; i < n; ++i) {
    auto s = co_await manager.session(sp::SessionOptions("bench").resource("counter"));
    auto v = co_await s.read("n");
    co_await s.write("n", v->get<int>() + 1);
    co_await s.commit();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s none|noop|prometheus CYCLES\n", argv[0]);
    return 2;
  }
  const std::string_view mode = argv[1];
  const int n = std::atoi(argv[2]);
  NoopObserver noop;
  sp::Observer* observer = nullptr;
#ifdef STATEPACT_BENCH_WITH_PROMETHEUS
  prometheus::Registry registry;
  sp::PrometheusObserver prom(registry);
  if (mode == "prometheus") observer = &prom;
#endif
  if (mode == "noop") observer = &noop;
  if (n <= 0 || (mode != "none" && mode != "noop" && !observer)) {
    std::fprintf(stderr, "unknown mode '%s' (or not built with it) or bad CYCLES '%s'\n", argv[1],
                 argv[2]);
    return 2;
  }
  asio::io_context io(1);
  asio::co_spawn(io, cycles(observer, n), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  return 0;
}
