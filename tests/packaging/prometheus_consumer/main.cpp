// A user of the installed statepact::prometheus: one commit on the memory backend shows up as a
// counter in the user's registry.
#include <statepact/prometheus.hpp>
#include <statepact/statepact.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <cstdio>

#include <prometheus/registry.h>

namespace sp = statepact;

static asio::awaitable<void> commit_once(sp::Manager<sp::MemoryBackend>& manager) {
  co_await manager.register_resource("job-42");
  auto s = co_await manager.session(sp::SessionOptions("consumer").resource("job-42"));
  co_await s.write("status", "done");
  co_await s.commit();
}

int main() {
  prometheus::Registry registry;
  sp::PrometheusObserver metrics(registry, {{"backend", "memory"}});
  sp::MemoryBackend backend;
  sp::Manager<sp::MemoryBackend> manager(backend);
  manager.set_observer(&metrics);
  asio::io_context io;
  asio::co_spawn(io, commit_once(manager), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  for (const auto& family : registry.Collect())
    if (family.name == "statepact_commits_total")
      for (const auto& m : family.metric)
        for (const auto& l : m.label)
          if (l.name == "outcome" && l.value == "applied" && m.counter.value == 1) {
            std::printf("consumer: statepact_commits_total{outcome=\"applied\"} 1\n");
            return 0;
          }
  std::printf("consumer: no applied commit counted\n");
  return 1;
}
