// A worker holding a job's lease while it works: renewed every ttl/3, released at the end, and
// every write fenced by the lease's token so a worker that lost the lease cannot corrupt the job.
#include <cstdio>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <statepact/statepact.hpp>

namespace sp = statepact;
using namespace std::chrono_literals;
using Backend = sp::MemoryBackend;

asio::awaitable<void> process_job(sp::Manager<Backend>& manager, const sp::Lease& lease) {
  for (int step = 1; step <= 3; ++step) {
    asio::steady_timer pause(co_await asio::this_coro::executor, 50ms);  // the real work
    co_await pause.async_wait(asio::use_awaitable);
    auto s = co_await manager.session(
        sp::SessionOptions(lease.owner).resource(lease.resource).fence(lease.token));
    co_await s.write("progress", step);
    co_await s.commit();
    std::printf("%s: step %d of %s committed under token %llu\n", lease.owner.c_str(), step,
                lease.resource.c_str(), static_cast<unsigned long long>(lease.token));
  }
}

asio::awaitable<void> worker(sp::Manager<Backend>& manager, sp::LeaseManager<Backend>& leases) {
  // hold() registers job-42 if needed, renews every third of the ttl, and releases at the end.
  auto job = [&manager](const sp::Lease& lease) { return process_job(manager, lease); };
  try {
    co_await leases.hold("job-42", "worker-a", job, sp::HoldOptions().auto_renew(true));
  } catch (const sp::LeaseLostError& e) {
    // Stop, re-acquire, re-read, redo: never retry a write with the old token.
    std::printf("lost the lease: %s\n", e.what());
    throw;
  }
  auto fence = co_await leases.current_fence("job-42");
  std::printf("done; lease released, high-water token stays %llu\n",
              static_cast<unsigned long long>(fence));
}

int main() {
  asio::io_context io;
  Backend backend;
  sp::Manager<Backend> manager(backend);             // transactions
  sp::LeaseManager<Backend> leases(backend, 300ms);  // leases; 300 ms is the default ttl
  int rc = 0;
  asio::co_spawn(io, worker(manager, leases), [&](std::exception_ptr e) { rc = e ? 1 : 0; });
  io.run();
  return rc;
}
