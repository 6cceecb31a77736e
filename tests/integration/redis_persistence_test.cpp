// With AOF on, fencing tokens survive a server restart and are never reused; the backend
// reconnects by itself and reloads its scripts (NOSCRIPT -> EVAL). Runs its own private server,
// so restarting it disturbs no other test.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"

namespace sp = statepact;

namespace {

class PrivateRedis {
 public:
  PrivateRedis()
      : port_(57000 + static_cast<int>(getpid() % 1000)),
        dir_(std::filesystem::temp_directory_path() /
             fmt::format("statepact-redis-persist-{}", getpid())) {
    std::filesystem::create_directories(dir_);
    start();
  }
  ~PrivateRedis() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string url() const { return fmt::format("redis://127.0.0.1:{}/0", port_); }

  void start() {
    const auto d = dir_.string();
    const auto cmd = fmt::format(
        "redis-server --port {} --bind 127.0.0.1 --daemonize yes --dir '{}' --appendonly yes "
        "--appendfsync always --save '' --pidfile '{}/redis.pid' --logfile '{}/redis.log'",
        port_, d, d, d);
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot start redis-server");
    for (int i = 0; i < 200 && !ping(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!ping()) throw std::runtime_error("private redis-server does not answer");
  }

  void stop() {
    if (redisContext* c = redisConnect("127.0.0.1", port_); c && !c->err) {
      if (auto* r = redisCommand(c, "SHUTDOWN")) freeReplyObject(r);  // AOF is fsynced first
      redisFree(c);
    } else if (c) {
      redisFree(c);
    }
    for (int i = 0; i < 200 && ping(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

 private:
  bool ping() const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    bool ok = false;
    if (c && !c->err) {
      if (auto* r = static_cast<redisReply*>(redisCommand(c, "PING"))) {
        ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
      }
    }
    if (c) redisFree(c);
    return ok;
  }

  int port_;
  std::filesystem::path dir_;
};

// The first call after a restart may still meet the dead connection: retry while unavailable.
asio::awaitable<sp::Token> fence_after_restart(sp::RedisBackend& b, std::string r) {
  for (int attempt = 0;; ++attempt) {
    try {
      co_return co_await b.current_fence(r);
    } catch (const sp::BackendUnavailableError&) {
      if (attempt == 20) throw;
    }
    co_await sp::test::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

TEST_CASE("with AOF, tokens survive a restart and are never reused", "[redis][integration]") {
  PrivateRedis server;
  sp::test::run([&server](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, server.url());
    const std::string r = "persisted-job";
    auto a = co_await b.acquire_lease(r, "worker-a", std::chrono::seconds(30));
    CHECK(a.token == 1);
    co_await b.release_lease(a);
    auto a2 = co_await b.acquire_lease(r, "worker-a", std::chrono::seconds(30));
    CHECK(a2.token == 2);

    server.stop();
    server.start();

    auto fence = co_await fence_after_restart(b, r);
    CHECK(fence == 2);
    // The live lease survived too: another owner is refused, the holder can renew. The scripts
    // are gone from the restarted server, so these also exercise the NOSCRIPT fallback.
    auto refused = false;
    try {
      co_await b.acquire_lease(r, "worker-b", std::chrono::seconds(30));
    } catch (const sp::LeaseNotAvailableError& e) {
      refused = e.holder_token() == 2;
    }
    CHECK(refused);
    auto renewed = co_await b.renew_lease(a2, std::nullopt);
    CHECK(renewed.token == 2);
    auto released = co_await b.release_lease(renewed);
    CHECK(released);
    auto b3 = co_await b.acquire_lease(r, "worker-b", std::chrono::seconds(30));
    CHECK(b3.token == 3);
  });
}
