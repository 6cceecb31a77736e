// The client's own deadline: through a relay that stops relaying, the server looks alive (the
// kernel still acknowledges every byte) but never answers, and statement_timeout never fires
// because the statement never arrives. Every call must still return by its call timeout, saying
// whether anything was sent, and a commit in doubt with an idempotency key is safe to send again.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>

#include <statepact/detail/fingerprint.hpp>
#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../conformance/postgres_fixture.hpp"
#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"

namespace sp = statepact;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// A TCP relay to the test server that can be frozen: bytes are still read (so acknowledged) but
// held until it thaws.
class Relay {
 public:
  Relay(asio::any_io_executor ex, tcp::endpoint upstream)
      : state_(std::make_shared<State>(ex, upstream)) {
    asio::co_spawn(ex, accept_loop(state_), asio::detached);
  }
  // Closed on every way out, or the accept loop would keep the test's io_context running.
  ~Relay() { close(); }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  unsigned short port() const { return state_->acceptor.local_endpoint().port(); }
  void freeze() { state_->frozen = true; }
  void thaw() { state_->frozen = false; }
  void close() {
    std::error_code ec;
    state_->acceptor.close(ec);
    for (auto& s : state_->sockets) s->close(ec);
  }

 private:
  struct State {
    State(asio::any_io_executor ex, tcp::endpoint up)
        : acceptor(ex, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), upstream(up) {}
    tcp::acceptor acceptor;
    tcp::endpoint upstream;
    bool frozen = false;
    std::vector<std::shared_ptr<tcp::socket>> sockets;
  };

  static asio::awaitable<void> pump(std::shared_ptr<State> st, std::shared_ptr<tcp::socket> from,
                                    std::shared_ptr<tcp::socket> to) {
    char buf[16384];
    asio::steady_timer pause(from->get_executor());
    for (;;) {
      std::error_code ec;
      auto n = co_await from->async_read_some(asio::buffer(buf),
                                              asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      while (st->frozen) {
        pause.expires_after(5ms);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      co_await asio::async_write(*to, asio::buffer(buf, n),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    std::error_code ignored;
    to->shutdown(tcp::socket::shutdown_send, ignored);
  }

  static asio::awaitable<void> accept_loop(std::shared_ptr<State> st) {
    for (;;) {
      auto down = std::make_shared<tcp::socket>(st->acceptor.get_executor());
      std::error_code ec;
      co_await st->acceptor.async_accept(*down, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      auto up = std::make_shared<tcp::socket>(st->acceptor.get_executor());
      co_await up->async_connect(st->upstream, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) continue;
      st->sockets.push_back(down);
      st->sockets.push_back(up);
      asio::co_spawn(st->acceptor.get_executor(), pump(st, down, up), asio::detached);
      asio::co_spawn(st->acceptor.get_executor(), pump(st, up, down), asio::detached);
    }
  }

  std::shared_ptr<State> state_;
};

// The test server's address, from its URL (postgresql://user@host:port/db).
tcp::endpoint server_endpoint(const std::string& url) {
  const auto at = url.find('@');
  const auto colon = url.find(':', at);
  const auto slash = url.find('/', colon);
  return {asio::ip::make_address(url.substr(at + 1, colon - at - 1)),
          static_cast<unsigned short>(std::stoi(url.substr(colon + 1, slash - colon - 1)))};
}

// The test URL with its host and port replaced by the relay's.
std::string through(const std::string& url, unsigned short port) {
  const auto at = url.find('@');
  const auto slash = url.find('/', url.find(':', at));
  return url.substr(0, at + 1) + "127.0.0.1:" + std::to_string(port) + url.substr(slash);
}

sp::CommitRequest order(const std::string& resource, const std::string& key) {
  sp::CommitRequest req;
  req.agent_id = "agent-a";
  req.resources.push_back(resource);
  req.writes.push_back(sp::WriteOp{resource, "status", sp::Value("paid")});
  req.idempotency_key = key;
  req.fingerprint = sp::detail::fingerprint(req.resources, req.writes);
  return req;
}

using Clock = std::chrono::steady_clock;

}  // namespace

TEST_CASE("a server that stops answering cannot outlast the call timeout",
          "[postgres][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string url = sp::test::postgres_test_url();
    Relay relay(ex, server_endpoint(url));
    const std::string r = sp::test::PostgresFixture(ex).resource("deadline");
    const std::string key = "order-" + r;
    {
      // One connection, so a stuck statement also holds up the call queued behind it; the
      // server's own timeout is far away.
      sp::PostgresBackend b(ex, through(url, relay.port()),
                            sp::PostgresOptions()
                                .pool_size(1)
                                .statement_timeout(60s)
                                .application_name("statepact-it-deadline")
                                .call_timeout(400ms));
      co_await b.register_resource(r, sp::Value::object());
      auto fence = co_await b.current_fence(r);
      CHECK(fence == 0);

      // Sent, never answered: unavailable, by the deadline.
      relay.freeze();
      auto t0 = Clock::now();
      auto silent = co_await sp::test::thrown<sp::BackendUnavailableError>(
          [&] { return b.current_fence(r); });
      REQUIRE(silent);
      CHECK(Clock::now() - t0 < 3s);
      CHECK(std::string(silent->what()).find("no reply within 400 ms") != std::string::npos);

      // The only connection is still stuck: a commit behind it is never sent, so it is plainly
      // unavailable, not in doubt.
      t0 = Clock::now();
      auto queued = co_await sp::test::thrown<sp::BackendUnavailableError>(
          [&] { return b.commit(order(r, key)); });
      REQUIRE(queued);
      CHECK(Clock::now() - t0 < 3s);
      CHECK(std::string(queued->what()).find("nothing was sent") != std::string::npos);

      // Thawed, the stuck statement finishes and the connection serves again.
      relay.thaw();
      fence = co_await b.current_fence(r);
      CHECK(fence == 0);

      // A commit sent into the silence is in doubt; with its idempotency key, sending it again
      // once the server answers applies it exactly once.
      relay.freeze();
      t0 = Clock::now();
      auto doubt = co_await sp::test::thrown<sp::CommitUnknownError>(
          [&] { return b.commit(order(r, key)); });
      REQUIRE(doubt);
      CHECK(Clock::now() - t0 < 3s);
      CHECK(doubt->has_idempotency_key());
      CHECK(doubt->retryable());
      relay.thaw();
      auto again = co_await b.commit(order(r, key));
      CHECK(again.replayed);
      auto entry = co_await b.read(r, "status");
      CHECK(entry.value == std::optional<sp::Value>(sp::Value("paid")));
      CHECK(entry.version == 1);
    }
    relay.close();
  });
}

TEST_CASE("the call timeout is validated and defaults past the server's own deadlines",
          "[postgres][integration]") {
  CHECK_THROWS_AS(sp::PostgresOptions().call_timeout(0ms), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().call_timeout(-5ms), sp::InvalidArgumentError);
  // Every duration has an upper bound: past it, time arithmetic would overflow somewhere.
  const auto hour = std::chrono::hours(1);
  const auto too_long = hour + 1ms;
  CHECK_THROWS_AS(sp::PostgresOptions().call_timeout(too_long), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().statement_timeout(too_long), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().lock_timeout(too_long), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().deadlock_timeout(too_long), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().connect_timeout(too_long), sp::InvalidArgumentError);
  CHECK_NOTHROW(
      sp::PostgresOptions().statement_timeout(hour).lock_timeout(hour).call_timeout(hour));
  CHECK_THROWS_AS(sp::PostgresOptions().idempotency_retention(std::chrono::hours(24 * 365) + 1ms),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().idempotency_retention(std::chrono::hours(24 * 365 * 300)),
                  sp::InvalidArgumentError);
  CHECK_NOTHROW(sp::PostgresOptions().idempotency_retention(std::chrono::hours(24 * 365)));
  auto o = sp::PostgresOptions().statement_timeout(2s).connect_timeout(3s);
  CHECK(o.call_timeout() == 6s);
  o.call_timeout(250ms);
  CHECK(o.call_timeout() == 250ms);
  o.statement_timeout(10s);
  CHECK(o.call_timeout() == 250ms);  // set explicitly: no longer derived
}

TEST_CASE("a session commit whose deadline passes before it starts rolls back the session",
          "[postgres][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string url = sp::test::postgres_test_url();
    Relay relay(ex, server_endpoint(url));
    const std::string r = sp::test::PostgresFixture(ex).resource("skipped-commit");
    std::vector<std::string> names(1, r);
    {
      sp::PostgresBackend b(ex, through(url, relay.port()),
                            sp::PostgresOptions().pool_size(1).call_timeout(400ms));
      sp::PostgresBackend other(ex, url);
      co_await b.register_resource(r, sp::Value::object());
      auto s = co_await b.begin_session(names, sp::Isolation::pessimistic);
      co_await b.lock(s, r, "k", sp::LockMode::exclusive, 1s);
      // A statement sent into the silence keeps the session's thread busy...
      relay.freeze();
      auto stuck = co_await sp::test::thrown<sp::BackendUnavailableError>(
          [&] { return b.lock(s, r, "k2", sp::LockMode::exclusive, 100ms); });
      CHECK(stuck);
      // ...so the commit behind it is never sent.
      sp::CommitRequest req = order(r, "skipped-" + r);
      req.session = s;
      auto queued =
          co_await sp::test::thrown<sp::BackendUnavailableError>([&] { return b.commit(req); });
      REQUIRE(queued);
      CHECK(std::string(queued->what()).find("nothing was sent") != std::string::npos);
      relay.thaw();
      // The skipped commit rolled the session back: its lock is free for another holder.
      auto t = co_await other.begin_session(names, sp::Isolation::pessimistic);
      auto got = co_await other.lock(t, r, "k", sp::LockMode::exclusive, 3s);
      CHECK_FALSE(got.value);
      other.end_session(t);
      auto e = co_await other.read(r, "status");
      CHECK_FALSE(e.value);
      CHECK(b.open_sessions() == 0);
    }
    relay.close();
  });
}
