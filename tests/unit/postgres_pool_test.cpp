// The PostgreSQL pool's rules (async_pool.hpp) with stand-in connections: no server.
#include <catch2/catch.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/errors.hpp>

#include "../postgres/async_call.hpp"
#include "../postgres/async_pool.hpp"

namespace pg = statepact::detail::pg;

namespace {

// A connection that says when it is closed.
struct PgPoolConn {
  PgPoolConn(int i, std::shared_ptr<std::vector<int>> c) : id(i), closed(std::move(c)) {}
  ~PgPoolConn() { closed->push_back(id); }
  int id;
  std::shared_ptr<std::vector<int>> closed;
};

using PgPool = pg::BasicPool<PgPoolConn>;

// What one take() came back with, once it has.
struct PgPoolTaken {
  bool done = false;
  std::unique_ptr<PgPoolConn> conn;  // null: leave to open one
  std::exception_ptr error;
};

std::shared_ptr<PgPoolTaken> pg_pool_take(asio::io_context& io, PgPool& pool) {
  auto out = std::make_shared<PgPoolTaken>();
  asio::co_spawn(
      io,
      [](PgPool& p, std::shared_ptr<PgPoolTaken> o) -> asio::awaitable<void> {
        try {
          o->conn = co_await p.take();
        } catch (...) {
          o->error = std::current_exception();
        }
        o->done = true;
      }(pool, out),
      asio::detached);
  io.poll();
  io.restart();
  return out;
}

void pg_pool_run(asio::io_context& io) {
  io.poll();
  io.restart();
}

}  // namespace

TEST_CASE("postgres pool: at most cap connections, idle ones reused first", "[postgres][pool]") {
  asio::io_context io;
  auto closed = std::make_shared<std::vector<int>>();
  PgPool pool(2);
  auto a = pg_pool_take(io, pool);
  auto b = pg_pool_take(io, pool);
  REQUIRE(a->done);
  REQUIRE(b->done);
  CHECK_FALSE(a->conn);  // both may open one
  CHECK_FALSE(b->conn);
  auto c = pg_pool_take(io, pool);
  CHECK_FALSE(c->done);  // the third waits: two are open

  pool.give_back(std::make_unique<PgPoolConn>(1, closed));
  pg_pool_run(io);
  REQUIRE(c->done);
  REQUIRE(c->conn);
  CHECK(c->conn->id == 1);  // handed straight to the waiter

  pool.give_back(std::move(c->conn));
  auto d = pg_pool_take(io, pool);
  REQUIRE(d->done);
  REQUIRE(d->conn);
  CHECK(d->conn->id == 1);  // reused, not a third connection
  CHECK(closed->empty());
}

TEST_CASE("postgres pool: a dropped connection's slot goes to the first waiter, in order",
          "[postgres][pool]") {
  asio::io_context io;
  auto closed = std::make_shared<std::vector<int>>();
  PgPool pool(1);
  auto a = pg_pool_take(io, pool);
  REQUIRE(a->done);
  auto first = pg_pool_take(io, pool);
  auto second = pg_pool_take(io, pool);
  CHECK_FALSE(first->done);
  CHECK_FALSE(second->done);

  pool.drop();  // the holder's connection broke
  pg_pool_run(io);
  REQUIRE(first->done);
  CHECK_FALSE(first->conn);  // leave to open a new one
  CHECK_FALSE(first->error);
  CHECK_FALSE(second->done);  // still one slot: the second keeps waiting

  pool.give_back(std::make_unique<PgPoolConn>(7, closed));
  pg_pool_run(io);
  REQUIRE(second->done);
  REQUIRE(second->conn);
  CHECK(second->conn->id == 7);
}

TEST_CASE("postgres pool: closing fails the waiters and later takes, and closes connections",
          "[postgres][pool]") {
  asio::io_context io;
  auto closed = std::make_shared<std::vector<int>>();
  PgPool pool(2);
  auto a = pg_pool_take(io, pool);
  auto b = pg_pool_take(io, pool);
  pool.give_back(std::make_unique<PgPoolConn>(1, closed));  // a's, now idle
  auto again = pg_pool_take(io, pool);                      // takes 1
  auto waiting = pg_pool_take(io, pool);
  CHECK_FALSE(waiting->done);

  pool.close();
  pg_pool_run(io);
  REQUIRE(waiting->done);
  CHECK_FALSE(waiting->conn);
  CHECK_THROWS_AS(std::rethrow_exception(waiting->error), statepact::BackendUnavailableError);

  pool.give_back(std::move(again->conn));  // given back after close: closed, not kept
  CHECK(*closed == std::vector<int>{1});
  auto late = pg_pool_take(io, pool);
  REQUIRE(late->done);
  REQUIRE(late->error);
  CHECK_THROWS_AS(std::rethrow_exception(late->error), statepact::BackendUnavailableError);
}

TEST_CASE("postgres pool: try_take takes what take() would without waiting, never past a waiter",
          "[postgres][pool]") {
  asio::io_context io;
  auto closed = std::make_shared<std::vector<int>>();
  PgPool pool(1);
  std::unique_ptr<PgPoolConn> got;
  REQUIRE(pool.try_take(got));  // a free slot: open one
  CHECK_FALSE(got);
  CHECK_FALSE(pool.try_take(got));  // the only slot is in use
  auto waiting = pg_pool_take(io, pool);
  CHECK_FALSE(waiting->done);
  pool.give_back(std::make_unique<PgPoolConn>(3, closed));
  CHECK_FALSE(pool.try_take(got));  // it went to the waiter
  pg_pool_run(io);
  REQUIRE(waiting->done);
  REQUIRE(waiting->conn);
  pool.give_back(std::move(waiting->conn));
  REQUIRE(pool.try_take(got));  // idle now: reused
  REQUIRE(got);
  CHECK(got->id == 3);
  pool.give_back(std::move(got));
  pool.close();
  CHECK_THROWS_AS(pool.try_take(got), statepact::BackendUnavailableError);
}

TEST_CASE("postgres pool: calls that fail before they wait answer through the scheduler",
          "[postgres][pool]") {
  // On a closed pool every call fails at once. Answered inline, each retry would run inside the
  // previous call's initiation and the stack would grow with every one of them.
  auto pool = std::make_shared<pg::AsyncPool>(1);
  pool->close();
  asio::io_context io;
  int failed = 0;
  asio::co_spawn(
      io,
      [](std::shared_ptr<pg::AsyncPool> p, int& n) -> asio::awaitable<void> {
        auto open = []() -> asio::awaitable<std::unique_ptr<pg::AsyncLink>> { co_return nullptr; };
        auto f = [](pg::AsyncLink&) -> asio::awaitable<pg::Answer> { co_return pg::Answer(); };
        for (int i = 0; i < 50000; ++i) {
          bool unavailable = false;
          try {
            const pg::Deadline deadline{std::chrono::seconds(5),
                                        statepact::detail::LostReply::read()};
            co_await pg::async_call(p, deadline, open, f);
          } catch (const statepact::BackendUnavailableError&) {
            unavailable = true;
          }
          if (unavailable) ++n;
        }
      }(pool, failed),
      asio::detached);
  io.run();
  CHECK(failed == 50000);
}
