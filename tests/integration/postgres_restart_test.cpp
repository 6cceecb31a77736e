// Tokens survive a server restart and are never reused after it; the same backend object
// reconnects by itself, after a clean stop and after a crash (SIGKILL). The test runs its own
// private server (on a port reserved for this process, started through scripts/servers/postgres.sh)
// so that restarting it disturbs no other test; each restart is confirmed by a new postmaster start
// time.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../conformance/postgres_fixture.hpp"
#include "../support/ports.hpp"
#include "../support/run.hpp"

namespace sp = statepact;

namespace {

const int port = sp::test::reserve_loopback_port();

std::string run_dir() {
  const char* d = std::getenv("STATEPACT_RUN_DIR");
  return fmt::format("{}/restart-test-{}", d && *d ? d : STATEPACT_BINARY_DIR "/run", port);
}

void server(const char* fn) {
  const std::string cmd =
      fmt::format("STATEPACT_RUN_DIR='{}' STATEPACT_PG_PORT={} bash -c 'source \"{}\" && {}'",
                  run_dir(), port, STATEPACT_SOURCE_DIR "/scripts/servers/postgres.sh", fn);
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

struct StopOnExit {
  ~StopOnExit() {
    const std::string cmd = fmt::format(
        "STATEPACT_RUN_DIR='{}' STATEPACT_PG_PORT={} bash -c 'source \"{}\" && {}'", run_dir(),
        port, STATEPACT_SOURCE_DIR "/scripts/servers/postgres.sh", "postgres_stop");
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "could not stop the private server in %s\n", run_dir().c_str());
      return;  // left for a look
    }
    std::error_code ec;
    std::filesystem::remove_all(run_dir(), ec);
  }
};

std::string url() {
  return fmt::format("postgresql://postgres@127.0.0.1:{}/statepact_test", port);
}

// When the running postmaster started: a restart shows as a new value.
std::string postmaster_started() {
  pqxx::connection c(url());
  pqxx::nontransaction n(c);
  return n.exec("SELECT pg_postmaster_start_time()::text").at(0)[0].as<std::string>();
}

bool answers() {
  try {
    pqxx::connection c(url());
    return c.is_open();
  } catch (const std::exception&) {
    return false;
  }
}

// Stops the server (`how` is postgres_stop or postgres_kill), checks it is down, starts it again
// and checks a new postmaster answers.
void restart(const char* how) {
  const auto before = postmaster_started();
  server(how);
  CHECK(!answers());
  server("postgres_start");
  const auto after = postmaster_started();
  INFO("postmaster started at " << before << ", then at " << after);
  REQUIRE(after != before);
}

}  // namespace

TEST_CASE("tokens survive a server restart and are never reused", "[postgres][integration]") {
  server("postgres_start");
  StopOnExit stop;
  for (const char* how : {"postgres_stop", "postgres_kill"}) {
    INFO("restarted by " << how);
    {
      sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
        sp::PostgresBackend b(ex, url());
        sp::Manager<sp::PostgresBackend> m(b);
        const std::string r = fmt::format("restart~{}~{}", how, sp::test::run_suffix());
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

        restart(how);

        // The high-water mark and the live lease are durable; the backend's old connections are
        // dead and replaced before anything is sent.
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
  }
}
