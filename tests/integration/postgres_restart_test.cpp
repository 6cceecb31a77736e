// Tokens survive a server restart and are never reused after it; the same backend object
// reconnects by itself. The test runs its own private server (on a free port, started through
// scripts/servers/postgres.sh) so that restarting it disturbs no other test.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../conformance/postgres_fixture.hpp"
#include "../support/run.hpp"

namespace sp = statepact;

namespace {

// A port nobody listens on now: the kernel picks it for a socket bound to port 0.
int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("cannot find a free port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

const int port = pick_free_port();

std::string run_dir() {
  const char* d = std::getenv("STATEPACT_RUN_DIR");
  return fmt::format("{}/restart-test", d && *d ? d : STATEPACT_BINARY_DIR "/run");
}

void server(const char* fn) {
  const std::string cmd =
      fmt::format("STATEPACT_RUN_DIR='{}' STATEPACT_PG_PORT={} bash -c 'source \"{}\" && {}'",
                  run_dir(), port, STATEPACT_SOURCE_DIR "/scripts/servers/postgres.sh", fn);
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

struct StopOnExit {
  ~StopOnExit() { server("postgres_stop"); }
};

}  // namespace

TEST_CASE("tokens survive a server restart and are never reused", "[postgres][integration]") {
  server("postgres_start");
  StopOnExit stop;
  const std::string url = fmt::format("postgresql://postgres@127.0.0.1:{}/statepact_test", port);
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, url);
    sp::Manager<sp::PostgresBackend> m(b);
    const std::string r = "restart~" + sp::test::run_suffix();
    auto a = co_await m.lease(r, "worker-a", 30s);
    auto released = co_await b.release_lease(a);
    CHECK(released);
    auto live = co_await b.acquire_lease(r, "worker-b", 30s);
    CHECK(live.token == a.token + 1);
    {
      auto s = co_await m.session(sp::SessionOptions("worker-b").resource(r).fence(live));
      co_await s.write("k", 1);
      co_await s.commit();
    }

    server("postgres_stop");
    server("postgres_start");

    // The high-water mark and the live lease are durable; the backend's old connections are dead
    // and replaced before anything is sent.
    auto fence = co_await b.current_fence(r);
    CHECK(fence == live.token);
    auto still = co_await b.renew_lease(live, std::nullopt);
    CHECK(still.token == live.token);
    auto refused = false;
    try {
      co_await b.acquire_lease(r, "worker-c", 30s);
    } catch (const sp::LeaseNotAvailableError&) {
      refused = true;
    }
    CHECK(refused);
    auto back = co_await b.release_lease(still);
    CHECK(back);
    auto next = co_await b.acquire_lease(r, "worker-c", 30s);
    CHECK(next.token == live.token + 1);
    auto e = co_await b.read(r, "k");
    CHECK(e.value == sp::Value(1));
    CHECK(e.version == 1);
  });
}
