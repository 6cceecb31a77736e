// The memory backend is shared by every thread and io_context of a process, while a lock wait
// belongs to one coroutine on one io_context. A wait whose coroutine is destroyed (its io_context
// shut down, as when a thread pool stops) must leave nothing behind: no queued wait that is later
// granted the lock, no waiter object bound to the dead io_context.
#include <chrono>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <statepact/backends/memory.hpp>

#include "../support/run.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

TEST_CASE("a lock wait destroyed with its io_context leaves no wait behind", "[memory][locks]") {
  sp::MemoryBackend backend;
  sp::test::run([&backend](asio::any_io_executor) -> asio::awaitable<void> {
    std::string name = "r";
    sp::Value empty = sp::Value::object();
    co_await backend.register_resource(name, empty);
  });
  const auto holder = backend.begin_session_now({"r"}, sp::Isolation::pessimistic);
  REQUIRE(backend.try_lock_now(holder, "r", "k", sp::LockMode::exclusive));
  const auto abandoned = backend.begin_session_now({"r"}, sp::Isolation::pessimistic);
  {
    asio::io_context io;
    asio::co_spawn(io, backend.lock(abandoned, "r", "k", sp::LockMode::exclusive, 30s),
                   asio::detached);
    io.run_for(20ms);  // the coroutine now waits for the holder
  }                    // the io_context, and the waiting coroutine with it, are gone
  // Releasing must grant the lock to nobody: the abandoned wait is no longer queued.
  backend.end_session(holder);
  const auto next = backend.begin_session_now({"r"}, sp::Isolation::pessimistic);
  CHECK(backend.try_lock_now(next, "r", "k", sp::LockMode::exclusive));
  backend.end_session(next);
  backend.end_session(abandoned);
}
