// PostgreSQL backend throughput and latency against pgbench running the same server-side calls
// with the same number of clients, in the same run. Prints a table; never used as a timed test.
//
// - acquire: by the lease's owner (the extend path), one lease per worker;
// - renew: of the worker's live lease;
// - acquire+release: an acquire then its release (release needs a live lease);
// - commit: writing one key of the worker's own resource, without a fence.
// pgbench runs the statements the backend prepares (src/postgres/statements.hpp), with the
// parameters written in, so both sides send the same SQL.
//
// Usage: statepact_bench_postgres [seconds per run, default 2] [rounds, default 5]. The server
// comes from STATEPACT_BENCH_POSTGRES_URL or STATEPACT_TEST_POSTGRES_URL; pgbench from
// STATEPACT_PGBENCH (default "pgbench").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/postgres.hpp>

#include "median.hpp"
#include "statements.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

enum class Op { acquire, renew, acquire_release, commit };
const char* op_name(Op op) {
  switch (op) {
    case Op::acquire:
      return "acquire";
    case Op::renew:
      return "renew";
    case Op::acquire_release:
      return "acquire+release";
    case Op::commit:
      return "commit";
  }
  return "?";
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string resource_for(const std::string& prefix, Op op, int worker) {
  return fmt::format("{}-{}-{}", prefix, static_cast<int>(op), worker + 1);
}

struct Sample {
  std::vector<double> latency_us;
};

// Registers the worker's resource and takes its lease; run for all workers at once, so every
// pool connection is open before the clock starts.
asio::awaitable<void> warm_up(sp::PostgresBackend& b, std::string resource, sp::Lease& lease,
                              std::atomic<int>& ready) {
  co_await b.register_resource(resource, sp::Value::object());
  lease = co_await b.acquire_lease(resource, "bench", 30s);
  ++ready;
}

asio::awaitable<void> worker(sp::PostgresBackend& b, Op op, std::string resource, sp::Lease lease,
                             Steady::time_point end, Sample& out, std::atomic<int>& done) {
  const std::string owner = "bench";
  sp::CommitRequest req;
  req.agent_id = owner;
  req.resources.push_back(resource);
  sp::WriteOp w;
  w.resource = resource;
  w.key = "k";
  w.value = sp::Value(1);
  req.writes.push_back(w);
  while (Steady::now() < end) {
    const auto t0 = Steady::now();
    switch (op) {
      case Op::acquire:
        lease = co_await b.acquire_lease(resource, owner, 30s);
        break;
      case Op::renew:
        lease = co_await b.renew_lease(lease, std::nullopt);
        break;
      case Op::acquire_release:
        lease = co_await b.acquire_lease(resource, owner, 30s);
        co_await b.release_lease(lease);
        break;
      case Op::commit: {
        sp::CommitRequest copy = req;
        co_await b.commit(std::move(copy));
        break;
      }
    }
    out.latency_us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
  }
  ++done;
}

struct Result {
  double per_second = 0, p50_us = 0, p99_us = 0;
};

Result ours(const std::string& url, const std::string& prefix, Op op, int workers,
            std::chrono::seconds length) {
  asio::io_context io(1);
  sp::PostgresBackend b(io.get_executor(), url,
                        sp::PostgresOptions().pool_size(static_cast<std::size_t>(workers)));
  std::vector<Sample> samples(static_cast<std::size_t>(workers));
  std::atomic<int> done{0};
  Steady::time_point t0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // Registration, leases and connections first, outside the measured time.
        std::vector<sp::Lease> leases(static_cast<std::size_t>(workers));
        std::atomic<int> ready{0};
        auto rethrow = [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        };
        for (int i = 0; i < workers; ++i)
          asio::co_spawn(io, warm_up(b, resource_for(prefix, op, i), leases[i], ready), rethrow);
        asio::steady_timer t(io);
        while (ready.load() < workers) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        t0 = Steady::now();
        const auto end = t0 + length;
        for (int i = 0; i < workers; ++i)
          asio::co_spawn(
              io, worker(b, op, resource_for(prefix, op, i), leases[i], end, samples[i], done),
              rethrow);
        while (done.load() < workers) {
          t.expires_after(5ms);
          co_await t.async_wait(asio::use_awaitable);
        }
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  const double elapsed = std::chrono::duration<double>(Steady::now() - t0).count();
  std::vector<double> all;
  for (auto& s : samples) all.insert(all.end(), s.latency_us.begin(), s.latency_us.end());
  std::sort(all.begin(), all.end());
  Result r;
  if (all.empty()) return r;
  r.per_second = static_cast<double>(all.size()) / elapsed;
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

// A prepared statement's SQL with its parameters $1, $2, ... written in, for pgbench.
std::string with_params(const char* sql, const std::vector<std::string>& params) {
  std::string out = sql;
  // From the last, so that $1 never matches the start of $10.
  for (std::size_t i = params.size(); i > 0; --i) {
    const std::string name = fmt::format("${}", i);
    for (auto at = out.find(name); at != std::string::npos; at = out.find(name, at))
      out.replace(at, name.size(), params[i - 1]);
  }
  return out + ";\n";
}

// The same calls as ours(), as a pgbench script; :client_id picks the client's own resource.
std::string pgbench_script(const std::string& prefix, Op op) {
  namespace stmt = sp::detail::pg::stmt;
  const std::string res =
      fmt::format("('{}-{}-' || (:client_id + 1))", prefix, static_cast<int>(op));
  const std::string token =
      fmt::format("(SELECT token FROM statepact_leases WHERE resource = {})", res);
  const std::string acquire = with_params(stmt::acquire_taken.sql, {res, "'bench'", "30000"});
  switch (op) {
    case Op::acquire:
      return acquire;
    case Op::renew:
      return with_params(stmt::renew_renewed.sql, {res, "'bench'", token, "30000"});
    case Op::acquire_release:
      return acquire + with_params(stmt::release.sql, {res, "'bench'", token});
    case Op::commit:
      // The call the backend makes for this request: one write, no check, no fence.
      return with_params(stmt::commit_write.sql, {res, "0", "'k'", "'1'"});
  }
  return "";
}

// pgbench's transactions per second (one transaction = one script run), or -1.
double pgbench(const std::string& url, const std::string& prefix, Op op, int clients,
               std::chrono::seconds length) {
  const std::string file =
      fmt::format("/tmp/statepact-bench-{}-{}.sql", prefix, static_cast<int>(op));
  {
    std::ofstream f(file);
    f << pgbench_script(prefix, op);
  }
  const std::string cmd = fmt::format("{} -n -M prepared -f {} -c {} -j {} -T {} '{}' 2>&1",
                                      env_or("STATEPACT_PGBENCH", "pgbench"), file, clients,
                                      clients, length.count(), url);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char line[512];
  double tps = -1;
  while (fgets(line, sizeof line, p)) std::sscanf(line, "tps = %lf", &tps);
  pclose(p);
  return tps;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url =
      env_or("STATEPACT_BENCH_POSTGRES_URL", env_or("STATEPACT_TEST_POSTGRES_URL", "").c_str());
  if (url.empty()) {
    std::fprintf(stderr, "set STATEPACT_BENCH_POSTGRES_URL (or STATEPACT_TEST_POSTGRES_URL)\n");
    return 2;
  }
  const std::chrono::seconds length(argc > 1 ? std::atoi(argv[1]) : 2);
  std::mt19937_64 rng(std::random_device{}());
  const std::string prefix = fmt::format("bench{:08x}", static_cast<unsigned>(rng()));
  // Rounds alternate who goes first, so neither side always meets a warmer (or more bloated)
  // table; the table shows each side's median over the rounds.
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::printf("%-16s %7s %12s %10s %10s %14s %8s\n", "operation", "workers", "ours ops/s", "p50 us",
              "p99 us", "pgbench ops/s", "ratio");
  for (int workers : {1, 8}) {
    for (Op op : {Op::acquire, Op::renew, Op::acquire_release, Op::commit}) {
      std::vector<Result> mine;
      std::vector<double> theirs;
      for (int round = 0; round < rounds; ++round) {
        if (round % 2 == 1) theirs.push_back(pgbench(url, prefix, op, workers, length));
        mine.push_back(ours(url, prefix, op, workers, length));
        if (round % 2 == 0) theirs.push_back(pgbench(url, prefix, op, workers, length));
      }
      const Result r = statepact::bench::median_by(std::move(mine),
                                                   [](const Result& x) { return x.per_second; });
      const double tps = statepact::bench::median_by(std::move(theirs), [](double x) { return x; });
      std::printf("%-16s %7d %12.0f %10.0f %10.0f %14.0f %8.2f\n", op_name(op), workers,
                  r.per_second, r.p50_us, r.p99_us, tps, tps > 0 ? r.per_second / tps : 0.0);
      std::fflush(stdout);
    }
  }
  std::printf("\n%d rounds of %lld s per side, alternating who goes first; each side's median\n",
              rounds, static_cast<long long>(length.count()));
  return 0;
}
