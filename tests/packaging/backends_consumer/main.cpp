// A user of the installed PostgreSQL and Redis backends: both link from the install prefix alone,
// and a server that is not there is BackendUnavailableError from each.
#include <statepact/postgres.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <chrono>
#include <cstdio>

#if defined(PQXX_H_PQXX) || defined(__HIREDIS_H)
#error "the backend headers must not pull in libpqxx or hiredis"
#endif

namespace sp = statepact;

template <class Backend>
static asio::awaitable<bool> unavailable(Backend& backend) {
  try {
    co_await backend.current_fence("job-42");
  } catch (const sp::BackendUnavailableError& e) {
    std::printf("consumer: %s\n", e.what());
    co_return true;
  }
  co_return false;
}

static asio::awaitable<int> consume(asio::any_io_executor ex) {
  // Port 1 on loopback: nothing listens, the connect is refused at once.
  sp::PostgresBackend pg(ex, "postgresql://statepact@127.0.0.1:1/statepact",
                         sp::PostgresOptions().connect_timeout(std::chrono::seconds(2)));
  sp::RedisBackend redis(ex, "redis://127.0.0.1:1/0");
  const bool pg_ok = co_await unavailable(pg);
  const bool redis_ok = co_await unavailable(redis);
  co_return pg_ok&& redis_ok ? 0 : 1;
}

int main() {
  asio::io_context io;
  int rc = 2;
  asio::co_spawn(io, consume(io.get_executor()),
                 [&](std::exception_ptr e, int r) { rc = e ? 3 : r; });
  io.run();
  std::printf("consumer: %s\n",
              rc == 0 ? "both backends linked and report a missing server" : "FAILED");
  return rc;
}
