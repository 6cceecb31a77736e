// A server that never answers: each command fails by its deadline, the connection is dropped and
// replaced, and a commit whose reply is missing is CommitUnknownError (never sent: unavailable).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"

namespace sp = statepact;
using asio::ip::tcp;

namespace {

// Answers the connection's eviction check (INFO memory: noeviction) and SCRIPT LOAD with a made-up
// SHA (so commits get as far as EVALSHA), and nothing else.
asio::awaitable<void> silent_peer(std::shared_ptr<tcp::socket> s) {
  char buf[8192];
  for (;;) {
    std::error_code ec;
    auto n = co_await s->async_read_some(asio::buffer(buf),
                                         asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    if (std::string(buf, n).find("INFO") != std::string::npos) {
      static const std::string info = "$29\r\nmaxmemory_policy:noeviction\r\n\r\n";
      co_await asio::async_write(*s, asio::buffer(info),
                                 asio::redirect_error(asio::use_awaitable, ec));
    }
    if (std::string(buf, n).find("LOAD") != std::string::npos) {
      static const std::string sha = "$40\r\n" + std::string(40, 'a') + "\r\n";
      co_await asio::async_write(*s, asio::buffer(sha),
                                 asio::redirect_error(asio::use_awaitable, ec));
    }
  }
}

asio::awaitable<void> accept_all(tcp::acceptor& acc,
                                 std::vector<std::shared_ptr<tcp::socket>>& out) {
  for (;;) {
    auto s = std::make_shared<tcp::socket>(acc.get_executor());
    std::error_code ec;
    co_await acc.async_accept(*s, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    out.push_back(s);
    asio::co_spawn(acc.get_executor(), silent_peer(s), asio::detached);
  }
}

}  // namespace

TEST_CASE("a missed deadline drops the connection, and a commit in doubt is CommitUnknownError",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    tcp::acceptor acc(ex, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    std::vector<std::shared_ptr<tcp::socket>> peers;
    asio::co_spawn(ex, accept_all(acc, peers), asio::detached);
    const auto url = "redis://127.0.0.1:" + std::to_string(acc.local_endpoint().port()) + "/0";
    {
      sp::RedisBackend b(ex, url,
                         sp::RedisOptions().command_timeout(std::chrono::milliseconds(200)));
      const auto t0 = std::chrono::steady_clock::now();
      bool unavailable = false;
      try {
        co_await b.current_fence("job");
      } catch (const sp::BackendUnavailableError&) {
        unavailable = true;
      }
      CHECK(unavailable);
      CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));

      sp::CommitRequest req;
      req.agent_id = "a";
      req.resources.push_back("job");
      req.idempotency_key = "order-1";
      bool unknown = false, idempotent = false;
      try {
        co_await b.commit(std::move(req));
      } catch (const sp::CommitUnknownError& e) {
        unknown = true;
        idempotent = e.has_idempotency_key() && e.retryable();
      }
      CHECK(unknown);
      CHECK(idempotent);
    }
    // Each timed-out command cost its connection: the second one came on a fresh connection.
    CHECK(peers.size() >= 2);
    acc.close();
    for (auto& p : peers) {
      std::error_code ec;
      p->close(ec);
    }
  });
}
