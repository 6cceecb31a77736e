// One error contract: every exception leaving RedisBackend is a statepact::Error, server replies
// are mapped by meaning, connection setup is checked, and a password never shows in a message.
#include <functional>
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
#include "redis_admin.hpp"

namespace sp = statepact;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// A fake server: parses RESP commands and answers each with answer(command name) (raw RESP).
using Answer = std::function<std::string(const std::string&)>;

asio::awaitable<void> fake_peer(std::shared_ptr<tcp::socket> s, Answer answer) {
  std::string in;
  char buf[8192];
  for (;;) {
    std::error_code ec;
    auto n = co_await s->async_read_some(asio::buffer(buf),
                                         asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    in.append(buf, n);
    std::string out;
    // Whole commands only: *<n>\r\n then n times $<len>\r\n<bytes>\r\n.
    for (;;) {
      std::size_t pos = 0;
      auto line = [&](std::size_t from) { return in.find("\r\n", from); };
      if (in.empty() || in[0] != '*') break;
      auto e = line(0);
      if (e == std::string::npos) break;
      const int count = std::stoi(in.substr(1, e - 1));
      pos = e + 2;
      std::string name;
      bool whole = true;
      for (int i = 0; i < count && whole; ++i) {
        auto le = line(pos);
        if (le == std::string::npos) {
          whole = false;
          break;
        }
        const auto len = std::stoul(in.substr(pos + 1, le - pos - 1));
        if (in.size() < le + 2 + len + 2) {
          whole = false;
          break;
        }
        if (i == 0) name = in.substr(le + 2, len);
        pos = le + 2 + len + 2;
      }
      if (!whole) break;
      in.erase(0, pos);
      out += answer(name);
    }
    if (out == "close") {  // the server hangs up instead of answering
      s->close(ec);
      co_return;
    }
    if (!out.empty())
      co_await asio::async_write(*s, asio::buffer(out),
                                 asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> accept_all(tcp::acceptor& acc, Answer answer) {
  for (;;) {
    auto s = std::make_shared<tcp::socket>(acc.get_executor());
    std::error_code ec;
    co_await acc.async_accept(*s, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    asio::co_spawn(acc.get_executor(), fake_peer(s, answer), asio::detached);
  }
}

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

// Setup passes (INFO says noeviction), SCRIPT LOAD gives a SHA, EVALSHA gets `evalsha`.
Answer server_answering(std::string evalsha) {
  return [evalsha](const std::string& name) -> std::string {
    if (name == "INFO") return bulk("maxmemory_policy:noeviction\r\n");
    if (name == "SCRIPT") return bulk(std::string(40, 'a'));
    if (name == "EVALSHA" || name == "EVAL") return evalsha;
    return "+OK\r\n";
  };
}

// What acquire_lease threw against a fake server answering EVALSHA with `evalsha`.
struct Thrown {
  bool is_error = false;  // a statepact::Error
  bool retryable = false;
  sp::ErrorCode code{};
  std::string what;
};

Thrown acquire_against(std::string evalsha) {
  return sp::test::run([evalsha](asio::any_io_executor ex) -> asio::awaitable<Thrown> {
    tcp::acceptor acc(ex, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    asio::co_spawn(ex, accept_all(acc, server_answering(evalsha)), asio::detached);
    const auto url = "redis://127.0.0.1:" + std::to_string(acc.local_endpoint().port()) + "/0";
    Thrown t;
    {
      // Short: TRYAGAIN and CLUSTERDOWN are resent until the deadline, then reported.
      sp::RedisBackend b(ex, url, sp::RedisOptions().command_timeout(500ms));
      try {
        co_await b.acquire_lease("job", "worker", 30s);
        t.what = "no exception";
      } catch (const sp::Error& e) {
        t.is_error = true;
        t.retryable = e.retryable();
        t.code = e.code();
        t.what = e.what();
      } catch (const std::exception& e) {
        t.what = e.what();
      }
    }
    acc.close();
    co_return t;
  });
}

}  // namespace

TEST_CASE("server error replies are mapped by meaning", "[redis][integration]") {
  // Refused for now (nothing ran): retryable unavailability.
  for (const char* reply :
       {"-LOADING Redis is loading the dataset in memory\r\n",
        "-BUSY Redis is busy running a script.\r\n",
        "-READONLY You can't write against a read only replica.\r\n",
        "-MASTERDOWN Link with MASTER is down\r\n", "-TRYAGAIN Multiple keys request\r\n",
        "-CLUSTERDOWN The cluster is down\r\n"}) {
    const auto t = acquire_against(reply);
    INFO(reply << " -> " << t.what);
    CHECK(t.is_error);
    CHECK(t.code == sp::ErrorCode::backend_unavailable);
    CHECK(t.retryable);
  }
  // Configuration to fix: not retryable, and says what to fix.
  const auto noperm =
      acquire_against("-NOPERM this user has no permissions to run the 'evalsha' command\r\n");
  CHECK(noperm.is_error);
  CHECK(noperm.code == sp::ErrorCode::configuration);
  CHECK_FALSE(noperm.retryable);
  CHECK_THAT(noperm.what, Catch::Contains("NOPERM") && Catch::Contains("fix:"));
  // Anything else keeps the server's text.
  const auto odd = acquire_against("-ERR something odd happened\r\n");
  CHECK(odd.is_error);
  CHECK_FALSE(odd.retryable);
  CHECK_THAT(odd.what, Catch::Contains("something odd happened"));
  // A malformed reply is a statepact::Error too, never a parser's exception.
  const auto garbled = acquire_against("*3\r\n$2\r\nok\r\n$5\r\nx-y-z\r\n$1\r\n5\r\n");
  CHECK(garbled.is_error);
  CHECK_FALSE(garbled.retryable);
}

TEST_CASE("a failed SELECT or AUTH fails the call clearly, and never runs it elsewhere",
          "[redis][integration]") {
  sp::test::RedisAdmin admin;
  const std::string prefix = "select-" + sp::test::random_hex();
  // The test server's URL with another database (the URL is redis://host:port/db).
  std::string base = sp::test::redis_test_url();
  base = base.substr(0, base.rfind('/'));
  const std::string host_port = base.substr(base.find("://") + 3);

  auto attempt = [&](std::string url) {
    return sp::test::run([&prefix, url](asio::any_io_executor ex) -> asio::awaitable<Thrown> {
      Thrown t;
      try {
        sp::RedisBackend b(ex, url, sp::RedisOptions().key_prefix(prefix));
        co_await b.register_resource("job");
        t.what = "no exception";
      } catch (const sp::Error& e) {
        t.is_error = true;
        t.retryable = e.retryable();
        t.code = e.code();
        t.what = e.what();
      }
      co_return t;
    });
  };

  const auto select = attempt(base + "/99999");
  INFO(select.what);
  CHECK(select.code == sp::ErrorCode::configuration);
  CHECK_FALSE(select.retryable);
  CHECK_THAT(select.what, Catch::Contains("SELECT") && Catch::Contains("99999"));
  CHECK(admin.keys_matching(prefix + ":*").empty());  // nothing landed on database 0

  // The test server has no password: AUTH fails, and the password is not in the message.
  const std::string secret = "s3cret-" + sp::test::random_hex();
  const auto auth = attempt("redis://:" + secret + "@" + host_port + "/0");
  INFO(auth.what);
  CHECK(auth.code == sp::ErrorCode::configuration);
  CHECK_FALSE(auth.retryable);
  CHECK_THAT(auth.what, Catch::Contains("AUTH") && !Catch::Contains(secret));
  CHECK(admin.keys_matching(prefix + ":*").empty());

  for (const auto& url : {"redis://:" + secret + "@" + host_port + "x/0",
                          "redis://" + secret + "@:1/0", "redis://u:" + secret + "@h:1/x"}) {
    const auto bad = attempt(url);
    INFO(bad.what);
    CHECK(bad.code == sp::ErrorCode::invalid_argument);
    CHECK_THAT(bad.what, !Catch::Contains(secret));
  }
}

TEST_CASE("duration options are bounded", "[redis][integration]") {
  using std::chrono::hours;
  CHECK_THROWS_AS(sp::RedisOptions().idempotency_retention(hours(24 * 366)),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RedisOptions().command_timeout(hours(2)), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RedisOptions().connect_timeout(hours(2)), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RedisOptions().lock_record_ttl(hours(2)), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RedisOptions().lock_record_ttl(0ms), sp::InvalidArgumentError);
  CHECK_NOTHROW(sp::RedisOptions()
                    .idempotency_retention(hours(24 * 365))
                    .command_timeout(hours(1))
                    .lock_record_ttl(hours(1)));
}

TEST_CASE("a connection lost during its setup sends nothing and starts over once",
          "[redis][integration]") {
  // The first connection is dropped when it asks INFO; the second answers. Nothing of the
  // caller's had been sent, so even a commit may go out on the new connection.
  auto connections = std::make_shared<int>(0);
  const std::string version_reply = "*3\r\n$2\r\nok\r\n$1\r\n0\r\n$0\r\n\r\n";
  Answer answer = [connections, version_reply](const std::string& name) -> std::string {
    if (name == "INFO")
      return ++*connections == 1 ? "close" : bulk("maxmemory_policy:noeviction\r\n");
    if (name == "SCRIPT") return bulk(std::string(40, 'a'));
    if (name == "EVALSHA") return version_reply;
    return "+OK\r\n";
  };
  bool committed = false;
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    tcp::acceptor acc(ex, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    asio::co_spawn(ex, accept_all(acc, answer), asio::detached);
    const auto url = "redis://127.0.0.1:" + std::to_string(acc.local_endpoint().port()) + "/0";
    {
      sp::RedisBackend b(ex, url);
      sp::CommitRequest req;
      req.agent_id = "a";
      req.resources = {"job"};
      auto result = co_await b.commit(std::move(req));
      committed = !result.replayed;
    }
    acc.close();
  });
  CHECK(committed);
  CHECK(*connections == 2);
}
