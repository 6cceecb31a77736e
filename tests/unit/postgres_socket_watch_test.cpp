// A pool connection's socket registration (socket_watch.hpp), on a socketpair: no server. Under
// the AddressSanitizer build these also catch a registration that outlives its io_context.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <system_error>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "../postgres/socket_watch.hpp"

namespace pg = statepact::detail::pg;

namespace {

// Both ends of a socketpair, closed at the end of the test.
struct SwPair {
  SwPair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0); }
  ~SwPair() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  void send() { REQUIRE(::write(fd[1], "x", 1) == 1); }
  void drain() {
    char c;
    REQUIRE(::read(fd[0], &c, 1) == 1);
  }
  int fd[2];
};

// Waits on `fd` through `watch` on `io`: how the wait ended, once it has, and on which descriptor.
struct SwWait {
  bool done = false;
  std::error_code ec;
  asio::posix::stream_descriptor* sd = nullptr;
};

std::shared_ptr<SwWait> sw_wait(asio::io_context& io, pg::SocketWatch& watch, int fd) {
  auto out = std::make_shared<SwWait>();
  asio::co_spawn(
      io,
      [](pg::SocketWatch& w, int f, std::shared_ptr<SwWait> o) -> asio::awaitable<void> {
        auto& sd = w.on(co_await asio::this_coro::executor, f);
        o->sd = &sd;
        co_await sd.async_wait(asio::posix::stream_descriptor::wait_read,
                               asio::redirect_error(asio::use_awaitable, o->ec));
        o->done = true;
      }(watch, fd, out),
      asio::detached);
  return out;
}

}  // namespace

TEST_CASE("postgres socket watch: one registration per io_context, kept between waits",
          "[postgres][pool]") {
  SwPair pair;
  pg::SocketWatch watch;
  asio::io_context io;
  pair.send();
  auto first = sw_wait(io, watch, pair.fd[0]);
  io.run();
  REQUIRE(first->done);
  CHECK_FALSE(first->ec);
  pair.drain();
  pair.send();
  io.restart();
  auto second = sw_wait(io, watch, pair.fd[0]);
  io.run();
  REQUIRE(second->done);
  CHECK_FALSE(second->ec);
  CHECK(second->sd == first->sd);  // not registered again

  // Another io_context: the registration moves there.
  asio::io_context other;
  auto third = sw_wait(other, watch, pair.fd[0]);
  other.run();
  REQUIRE(third->done);
  CHECK_FALSE(third->ec);
  // The socket is still open: only released, never closed.
  CHECK(::fcntl(pair.fd[0], F_GETFD) != -1);
}

TEST_CASE("postgres socket watch: a connection outlives the io_context that watched it",
          "[postgres][pool]") {
  SwPair pair;
  pg::SocketWatch watch;
  std::shared_ptr<SwWait> pending;
  {
    asio::io_context io;
    pair.send();
    auto done = sw_wait(io, watch, pair.fd[0]);
    io.run();
    REQUIRE(done->done);
    pair.drain();
    io.restart();
    // A wait that never ends, left pending when the io_context goes.
    pending = sw_wait(io, watch, pair.fd[0]);
    io.run_for(std::chrono::milliseconds(10));
    CHECK_FALSE(pending->done);
  }
  // The registration went with that io_context; the connection works on a new one and is
  // destroyed after it too.
  {
    asio::io_context io;
    pair.send();
    auto again = sw_wait(io, watch, pair.fd[0]);
    io.run();
    REQUIRE(again->done);
    CHECK_FALSE(again->ec);
  }
  CHECK(::fcntl(pair.fd[0], F_GETFD) != -1);
}

TEST_CASE("postgres socket watch: once forgotten, a socket that reuses the number is left alone",
          "[postgres][pool]") {
  asio::io_context io;
  auto watch = std::make_unique<pg::SocketWatch>();
  int old_fd = -1;
  {
    SwPair gone;
    old_fd = gone.fd[0];
    gone.send();
    auto done = sw_wait(io, *watch, gone.fd[0]);
    io.run();
    REQUIRE(done->done);
    watch->forget();  // as when libpq is about to close the socket
  }
  SwPair pair;
  REQUIRE(pair.fd[0] == old_fd);  // the lowest free number: the old one
  asio::posix::stream_descriptor other(io, pair.fd[0]);
  bool woke = false;
  other.async_wait(asio::posix::stream_descriptor::wait_read,
                   [&](std::error_code ec) { woke = !ec; });
  watch.reset();  // must not take `other`'s socket out of the reactor
  pair.send();
  io.restart();
  io.run_for(std::chrono::seconds(5));
  CHECK(woke);
  other.release();
}
