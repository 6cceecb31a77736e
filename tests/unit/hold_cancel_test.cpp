// hold() releases its lease however it ends, a cancellation that lands between the acquire and the
// body's start included (it must not leave the lease to expire on its own).
#include <catch2/catch.hpp>

#include <exception>
#include <optional>
#include <system_error>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <statepact/statepact.hpp>

#include "../support/faulty_backend.hpp"
#include "../support/run.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

// Takes the lease, then cancels the caller before answering: the cancellation is pending when
// hold() goes on to start the body.
struct CancelAfterAcquire : sp::test::FaultyBackend<sp::MemoryBackend> {
  using sp::test::FaultyBackend<sp::MemoryBackend>::FaultyBackend;
  asio::cancellation_signal* signal = nullptr;
  asio::awaitable<sp::Lease> acquire_lease(std::string resource, std::string owner,
                                           sp::milliseconds ttl) {
    sp::Lease lease = co_await sp::test::FaultyBackend<sp::MemoryBackend>::acquire_lease(
        std::move(resource), std::move(owner), ttl);
    signal->emit(asio::cancellation_type::terminal);
    co_return lease;
  }
};

}  // namespace

TEST_CASE("hold: a cancellation between acquire and the body still releases the lease",
          "[hold][cancel]") {
  const bool auto_renew = GENERATE(true, false);
  INFO("auto_renew " << auto_renew);
  sp::MemoryBackend backend;
  CancelAfterAcquire faulty(backend);
  asio::cancellation_signal signal;
  faulty.signal = &signal;
  sp::LeaseManager<CancelAfterAcquire> leases(faulty, 30s);

  asio::io_context io;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(io,
                 leases.hold(
                     "job", "worker-a",
                     [](const sp::Lease&) -> asio::awaitable<void> {
                       asio::steady_timer t(co_await asio::this_coro::executor, 10ms);
                       co_await t.async_wait(asio::use_awaitable);
                     },
                     sp::HoldOptions().auto_renew(auto_renew)),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e) {
                   error = e;
                   done = true;
                 }));
  io.run();
  REQUIRE(done);
  REQUIRE(error);
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& e) {
    CHECK(e.code() == asio::error::operation_aborted);
  }
  const auto holder =
      sp::test::run([&](asio::any_io_executor) { return backend.lease_holder("job"); });
  CHECK_FALSE(holder);
}
