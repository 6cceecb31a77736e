// A memory-only user of the installed package: a lease, a fenced commit, a stale write refused.
#include <statepact/statepact.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <cstdio>

#if defined(PQXX_H_PQXX) || defined(__HIREDIS_H)
#error "statepact.hpp must not pull in libpqxx or hiredis"
#endif

namespace sp = statepact;

static asio::awaitable<int> consume() {
  sp::MemoryBackend backend;
  sp::Manager<sp::MemoryBackend> manager(backend);
  auto a = co_await manager.lease("job-42", "worker-a", std::chrono::seconds(30));
  co_await backend.release_lease(a);
  auto b = co_await manager.lease("job-42", "worker-b", std::chrono::seconds(30));
  auto stale =
      co_await manager.session(sp::SessionOptions("worker-a").resource("job-42").fence(a.token));
  co_await stale.write("status", "running");
  try {
    co_await stale.commit();
  } catch (const sp::LeaseLostError&) {
    co_return b.token == 2 ? 0 : 1;
  }
  co_return 1;
}

int main() {
  asio::io_context io;
  int rc = 2;
  asio::co_spawn(io, consume(), [&](std::exception_ptr e, int r) { rc = e ? 3 : r; });
  io.run();
  std::printf("consumer: %s\n", rc == 0 ? "stale write refused, as it should be" : "FAILED");
  return rc;
}
