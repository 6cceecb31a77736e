// One process of the multi-process lease race (tests/integration/lease_race.hpp): wins a lease
// `wins` times, each time writing through a fenced session, and records for every win its token and
// the CLOCK_MONOTONIC times (shared by all processes of the machine) just after the acquisition
// returned and just before the release was sent.
//
//   statepact_lease_contender postgres|redis URL RESOURCE OWNER WINS OUTPUT START_NS [freeze]
//
// Every commit appends its token to the "log" array of RESOURCE, so the test reads back from
// storage the order in which commits landed.
//
// With `freeze` the process is the stale writer: it wins once with a 300 ms ttl, writes the token
// to OUTPUT, stops itself (SIGSTOP) and, once the test continued it (after a newer token exists),
// commits under its old token and appends "refused" or "landed" to OUTPUT (exit status 4 when
// it landed).
//
// START_NS is a CLOCK_MONOTONIC time: each process connects first and starts racing then, so
// slow process start-up does not leave one process racing alone.
// Exit status: 0 when every win was recorded; 1 on bad arguments or an error; 3 when storage
// refused a fenced write while this process held a live lease.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/statepact.hpp>
#ifdef STATEPACT_HAVE_POSTGRES
#include <statepact/postgres.hpp>
#endif
#ifdef STATEPACT_HAVE_REDIS
#include <statepact/redis.hpp>
#endif

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

struct Win {
  sp::Token token;
  long long acquired_ns, releasing_ns;
};

long long monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

asio::awaitable<void> pause(std::chrono::microseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

struct FencedWriteRefused {};

// Commits, fenced by `lease`, the holder's name and its token appended to the "log" array; a
// conflict re-runs it. Returns false when storage refused the token (LeaseLostError).
template <class B>
asio::awaitable<bool> append_token(sp::Manager<B>& manager, std::string owner, sp::Lease lease) {
  auto append = [&](sp::Session<B>& s) -> asio::awaitable<void> {
    auto log = co_await s.read("log");
    sp::Value next = log ? *log : sp::Value::array();
    next.push_back(lease.token);
    co_await s.write("log", next);
    co_await s.write("holder", sp::Value(owner));
  };
  bool refused = false;
  try {
    co_await manager.run(
        sp::SessionOptions(owner).resource(lease.resource).fence(lease), append,
        sp::RetryPolicy().max_attempts(1000).initial_backoff(1ms).max_backoff(5ms));
  } catch (const sp::LeaseLostError&) {
    refused = true;
  }
  co_return !refused;
}

// The stale writer: wins once, freezes past its ttl, then commits under its old token.
template <class B>
asio::awaitable<std::string> frozen(std::string url, std::string resource, std::string owner,
                                    std::string output, long long start_ns) {
  B backend(co_await asio::this_coro::executor, url);
  sp::Manager<B> manager(backend);
  co_await backend.current_fence(resource);
  if (const long long wait = start_ns - monotonic_ns(); wait > 0)
    co_await pause(std::chrono::microseconds(wait / 1000));
  std::optional<sp::Lease> lease;
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (!lease) {
    if (std::chrono::steady_clock::now() > give_up)
      throw std::runtime_error("no win for 120 s: the lease never came free");
    try {
      lease = co_await manager.lease(resource, owner, 300ms);
    } catch (const sp::LeaseNotAvailableError&) {
    }
    if (!lease) co_await pause(500us);
  }
  {
    std::ofstream out(output);
    out << lease->token << '\n';
  }
  std::raise(SIGSTOP);  // the test continues it once a newer token exists
  const bool landed = co_await append_token(manager, owner, *lease);
  co_return landed ? "landed" : "refused";
}

// The backend lives in the coroutine, so it is closed before io.run() returns.
template <class B>
asio::awaitable<std::vector<Win>> contend(std::string url, std::string resource, std::string owner,
                                          int wins, long long start_ns) {
  B backend(co_await asio::this_coro::executor, url);
  sp::Manager<B> manager(backend);
  co_await backend.current_fence(resource);  // connected before the start
  if (const long long wait = start_ns - monotonic_ns(); wait > 0)
    co_await pause(std::chrono::microseconds(wait / 1000));
  std::vector<Win> out;
  std::mt19937 rng(std::random_device{}());
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (static_cast<int>(out.size()) < wins) {
    if (std::chrono::steady_clock::now() > give_up)
      throw std::runtime_error("no win for 120 s: the lease never came free");
    std::optional<sp::Lease> lease;
    try {
      lease = co_await manager.lease(resource, owner, 20s);
    } catch (const sp::LeaseNotAvailableError&) {
    }
    if (!lease) {
      co_await pause(std::chrono::microseconds(200 + rng() % 800));
      continue;
    }
    Win w{lease->token, monotonic_ns(), 0};
    const bool landed = co_await append_token(manager, owner, *lease);
    const bool refused = !landed;
    if (refused) throw FencedWriteRefused{};
    co_await pause(1ms);
    w.releasing_ns = monotonic_ns();
    co_await backend.release_lease(*lease);
    out.push_back(w);
    co_await pause(std::chrono::microseconds(rng() % 2000));  // give the others a chance
  }
  co_return out;
}

template <class B>
int run(const std::string& url, const std::string& resource, const std::string& owner, int wins,
        const std::string& output, long long start_ns) {
  asio::io_context io(1);
  std::vector<Win> result;
  std::exception_ptr error;
  asio::co_spawn(io, contend<B>(url, resource, owner, wins, start_ns),
                 [&](std::exception_ptr e, std::vector<Win> r) {
                   error = e;
                   result = std::move(r);
                 });
  io.run();
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const FencedWriteRefused&) {
      std::fprintf(stderr, "%s: a fenced write was refused while the lease was live\n",
                   owner.c_str());
      return 3;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", owner.c_str(), e.what());
      return 1;
    }
  }
  std::ofstream out(output);
  for (const auto& w : result)
    out << w.token << ' ' << w.acquired_ns << ' ' << w.releasing_ns << '\n';
  out.close();
  return out ? 0 : 1;
}

template <class B>
int run_frozen(const std::string& url, const std::string& resource, const std::string& owner,
               const std::string& output, long long start_ns) {
  asio::io_context io(1);
  std::string verdict;
  std::exception_ptr error;
  asio::co_spawn(io, frozen<B>(url, resource, owner, output, start_ns),
                 [&](std::exception_ptr e, std::string v) {
                   error = e;
                   verdict = std::move(v);
                 });
  io.run();
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", owner.c_str(), e.what());
      return 1;
    }
  }
  std::ofstream out(output, std::ios::app);
  out << verdict << '\n';
  out.close();
  if (!out) return 1;
  return verdict == "landed" ? 4 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool freeze = argc == 9 && std::string(argv[8]) == "freeze";
  if (argc != 8 && !freeze) {
    std::fprintf(stderr,
                 "usage: %s postgres|redis URL RESOURCE OWNER WINS OUTPUT START_NS [freeze]\n",
                 argv[0]);
    return 1;
  }
  const std::string kind = argv[1], url = argv[2], resource = argv[3], owner = argv[4];
  const int wins = std::atoi(argv[5]);
  const std::string output = argv[6];
  const long long start_ns = std::atoll(argv[7]);
  if (wins <= 0) {
    std::fprintf(stderr, "WINS must be a positive number\n");
    return 1;
  }
  if (freeze) {
#ifdef STATEPACT_HAVE_POSTGRES
    if (kind == "postgres")
      return run_frozen<sp::PostgresBackend>(url, resource, owner, output, start_ns);
#endif
#ifdef STATEPACT_HAVE_REDIS
    if (kind == "redis")
      return run_frozen<sp::RedisBackend>(url, resource, owner, output, start_ns);
#endif
  }
#ifdef STATEPACT_HAVE_POSTGRES
  if (kind == "postgres")
    return run<sp::PostgresBackend>(url, resource, owner, wins, output, start_ns);
#endif
#ifdef STATEPACT_HAVE_REDIS
  if (kind == "redis") return run<sp::RedisBackend>(url, resource, owner, wins, output, start_ns);
#endif
  std::fprintf(stderr, "unknown or unbuilt backend '%s'\n", kind.c_str());
  return 1;
}
