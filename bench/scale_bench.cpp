// Cost as storage fills: acquire (the owner extending its live lease), renew and a one-key fenced
// commit on random resources out of 1k, 100k and 1M registered resources, each with a live lease,
// on every backend; each size's throughput is also shown as a ratio to the 1k figure. It prints the
// storage each resource takes: heap bytes for the memory backend, table and index bytes for
// PostgreSQL (its own schema, dropped afterwards), used memory for Redis. The server backends
// remember up to 2M registered names (known_resources) and have seen every resource once, so a
// session begins without a round trip at every size. The memory rows come with a plain hash map's
// in the same run, the baseline for what random lookups cost as a map grows. A benchmark, never a
// timed test.
//
// Usage: statepact_bench_scale [memory|postgres|redis|all] [largest size, default 1000000]
//        [seconds per measurement, default 2]
// Servers from STATEPACT_TEST_POSTGRES_URL and STATEPACT_TEST_REDIS_URL (a backend without its URL
// is skipped); psql and redis-cli on PATH.
#include <malloc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/postgres.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "aof_rewrite.hpp"
#include "redis_address.hpp"
#include "shell.hpp"
#include "workers.hpp"

namespace sp = statepact;
using sp::bench::env_or;
using sp::bench::run_to_end;
using sp::bench::shell;
using sp::bench::shell_quoted;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

// op(i) for every i in [from, to), `workers` calls at a time.
asio::awaitable<void> spread(int workers, long from, long to,
                             std::function<asio::awaitable<void>(long)> op) {
  co_await sp::bench::side_by_side(workers, [&](int w) -> asio::awaitable<void> {
    for (long i = from + w; i < to; i += workers) co_await op(i);
  });
}

enum class Op { acquire, renew, commit };

struct Figures {
  long resources = 0;
  double per_second[3] = {0, 0, 0};
  double bytes_per_resource = 0;
};

// Throughput of `op` on random resources of the first `n`, `workers` at a time, for `length`.
template <class B>
double measure(asio::io_context& io, B& b, sp::Manager<B>& m, const std::string& prefix, long n,
               Op op, int workers, std::chrono::seconds length) {
  long done = 0;
  Steady::time_point t0, t1;
  run_to_end(io, [&]() -> asio::awaitable<void> {
    t0 = Steady::now();
    const auto end = t0 + length;
    co_await sp::bench::side_by_side(workers, [&](int w) -> asio::awaitable<void> {
      std::mt19937_64 rng(static_cast<unsigned>(w) * 7919u + 1);
      std::uniform_int_distribution<long> pick(0, n - 1);
      for (int i = 0; Steady::now() < end; ++i) {
        const std::string r = fmt::format("{}-{}", prefix, pick(rng));
        if (op == Op::acquire) {
          auto l = co_await b.acquire_lease(r, "holder", 1h);
          if (l.token != 1) throw std::runtime_error("unexpected token");
        } else if (op == Op::renew) {
          const sp::Lease lease{r, "holder", 1, {}, 1h};
          co_await b.renew_lease(lease, std::nullopt);
        } else {
          auto s = co_await m.session(sp::SessionOptions("bench").resource(r).fence(1));
          co_await s.write("k", sp::Value(i));
          co_await s.commit();
        }
        ++done;
      }
    });
    t1 = Steady::now();
  });
  return static_cast<double>(done) / std::chrono::duration<double>(t1 - t0).count();
}

// Registers resources [from, to) with a live lease of "holder" (token 1) through the API.
template <class B>
void fill_through_api(asio::io_context& io, B& b, const std::string& prefix, long from, long to,
                      int workers) {
  run_to_end(io, [&]() -> asio::awaitable<void> {
    co_await spread(workers, from, to, [&](long i) -> asio::awaitable<void> {
      const std::string r = fmt::format("{}-{}", prefix, i);
      co_await b.register_resource(r, sp::Value::object());
      co_await b.acquire_lease(r, "holder", 1h);
    });
  });
}

// Begins (and ends) one session over every 1,000 of resources [from, to), so the backend knows
// them all, as a client coming back to its own resources does: a session over them then begins
// without a round trip, and what is measured is the storage's cost, not the existence check.
template <class B>
void get_to_know(asio::io_context& io, B& b, const std::string& prefix, long from, long to) {
  constexpr long chunk = 1000;
  run_to_end(io, [&]() -> asio::awaitable<void> {
    co_await spread(8, 0, (to - from + chunk - 1) / chunk, [&](long c) -> asio::awaitable<void> {
      std::vector<std::string> names;
      for (long i = from + c * chunk; i < std::min(to, from + (c + 1) * chunk); ++i)
        names.push_back(fmt::format("{}-{}", prefix, i));
      auto id = co_await b.begin_session(names, sp::Isolation::optimistic);
      b.end_session(id);
    });
  });
}

template <class B>
std::vector<Figures> scale(const char* name, asio::io_context& io, B& b,
                           const std::vector<long>& sizes, int workers, std::chrono::seconds length,
                           const std::string& prefix, std::function<void(long, long)> fill,
                           std::function<double()> bytes) {
  sp::Manager<B> m(b);
  std::vector<Figures> out;
  long have = 0;
  const double base_bytes = bytes();
  for (long n : sizes) {
    const auto f0 = Steady::now();
    fill(have, n);
    get_to_know(io, b, prefix, have, n);
    have = n;
    std::fprintf(stderr, "%s: %ld resources filled in %.0f s\n", name, n,
                 std::chrono::duration<double>(Steady::now() - f0).count());
    Figures f;
    f.resources = n;
    f.bytes_per_resource = (bytes() - base_bytes) / static_cast<double>(n);
    for (Op op : {Op::acquire, Op::renew, Op::commit})
      f.per_second[static_cast<int>(op)] = measure(io, b, m, prefix, n, op, workers, length);
    out.push_back(f);
  }
  return out;
}

// The baseline for the memory rows, in the same run: a plain std::unordered_map from the same
// names to entries of about a resource's size, looked up at random and updated (an expiry moved),
// as an acquire by the owner does. What it loses from 1k to 1M is what any hash map of that many
// entries pays in cache misses, not the backend's own cost.
struct PlainEntry {
  std::string owner = "holder";
  std::int64_t token = 1, expires = 0;
  std::array<char, 256> rest{};  // the rest of a resource: its state, policy, version
};

std::vector<Figures> plain_map(const std::vector<long>& sizes, const std::string& prefix,
                               std::chrono::seconds length) {
  std::vector<Figures> out;
  const double base_bytes = static_cast<double>(mallinfo2().uordblks);
  std::unordered_map<std::string, PlainEntry> map;
  for (long n : sizes) {
    for (long i = static_cast<long>(map.size()); i < n; ++i)
      map.emplace(fmt::format("{}-{}", prefix, i), PlainEntry{});
    Figures f;
    f.resources = n;
    f.bytes_per_resource =
        (static_cast<double>(mallinfo2().uordblks) - base_bytes) / static_cast<double>(n);
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<long> pick(0, n - 1);
    long done = 0;
    const auto t0 = Steady::now(), end = t0 + length;
    Steady::time_point t1 = t0;
    for (; (done & 1023) != 0 || (t1 = Steady::now()) < end; ++done) {
      auto it = map.find(fmt::format("{}-{}", prefix, pick(rng)));
      if (it == map.end() || it->second.owner != "holder") throw std::runtime_error("lost entry");
      it->second.expires += done;
    }
    f.per_second[0] = static_cast<double>(done) / std::chrono::duration<double>(t1 - t0).count();
    out.push_back(f);
  }
  return out;
}

void print(const char* backend, int workers, const char* bytes_what,
           const std::vector<Figures>& rows) {
  if (rows.empty()) return;
  const Figures& base = rows.front();
  for (const auto& f : rows) {
    auto cell = [&](int op) {
      return fmt::format("{:.0f} ({:.2f})", f.per_second[op],
                         f.per_second[op] / base.per_second[op]);
    };
    std::printf("| %s | %d | %ld | %s | %s | %s | %.0f %s |\n", backend, workers, f.resources,
                cell(0).c_str(), cell(1).c_str(), cell(2).c_str(), f.bytes_per_resource,
                bytes_what);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which != "all" && which != "memory" && which != "postgres" && which != "redis") {
    std::fprintf(stderr,
                 "usage: statepact_bench_scale [memory|postgres|redis|all] [largest size] "
                 "[seconds]\n");
    return 2;
  }
  const long largest = argc > 2 ? std::max(1000L, std::atol(argv[2])) : 1000000;
  const std::chrono::seconds length(argc > 3 ? std::max(1, std::atoi(argv[3])) : 2);
  std::vector<long> sizes;
  for (long n : {1000L, 100000L, 1000000L})
    if (n <= largest) sizes.push_back(n);
  std::mt19937_64 rng(std::random_device{}());
  const std::string run_id = fmt::format("{:08x}", static_cast<unsigned>(rng()));
  const std::string prefix = "scale-" + run_id;
  std::printf(
      "| backend | workers | resources | acquire/s (vs 1k) | renew/s (vs 1k) | one-key commit/s "
      "(vs 1k) | storage per resource |\n|---|---|---|---|---|---|---|\n");

  if (which == "all" || which == "memory") {
    asio::io_context io(1);
    sp::MemoryBackend b;
    auto heap = [] { return static_cast<double>(mallinfo2().uordblks); };
    auto rows = scale<sp::MemoryBackend>(
        "memory", io, b, sizes, 1, length, prefix,
        [&](long from, long to) { fill_through_api(io, b, prefix, from, to, 1); }, heap);
    print("memory", 1, "heap bytes", rows);
    const auto plain = plain_map(sizes, prefix, length);
    for (const auto& f : plain)
      std::printf(
          "| plain `std::unordered_map`, lookup and update | 1 | %ld | %.0f (%.2f) | | | %.0f "
          "heap bytes |\n",
          f.resources, f.per_second[0], f.per_second[0] / plain.front().per_second[0],
          f.bytes_per_resource);
    std::fflush(stdout);
  }

  const std::string pg_url = env_or("STATEPACT_TEST_POSTGRES_URL", "");
  if ((which == "all" || which == "postgres") && !pg_url.empty()) {
    const std::string schema = "scale_" + run_id;
    {
      asio::io_context io(1);
      sp::PostgresBackend b(
          io.get_executor(), pg_url,
          sp::PostgresOptions().schema(schema).pool_size(8).known_resources(2000000));
      run_to_end(io, [&]() -> asio::awaitable<void> { co_await b.migrate(); });
      // Registration and leases in bulk, straight into the backend's tables: a million calls
      // through the API would take minutes and measure nothing this benchmark is about.
      auto fill = [&](long from, long to) {
        shell(fmt::format(
            "psql -q -v ON_ERROR_STOP=1 {} -c {}", shell_quoted(pg_url),
            shell_quoted(fmt::format(
                "SET search_path = {0}; "
                "INSERT INTO statepact_resources (name, version) "
                "SELECT '{1}-' || i, 0 FROM generate_series({2}, {3}) i; "
                "INSERT INTO statepact_leases (resource, owner, token, expires_at, ttl_ms) "
                "SELECT '{1}-' || i, 'holder', 1, now() + interval '1 hour', 3600000 "
                "FROM generate_series({2}, {3}) i; ANALYZE;",
                schema, prefix, from, to - 1))));
      };
      auto bytes = [&] {
        const std::string out = shell(fmt::format(
            "psql -qtA {} -c {}", shell_quoted(pg_url),
            shell_quoted(fmt::format(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = '{}' AND c.relkind = 'r' AND "
                "c.relname IN ('statepact_resources', 'statepact_leases', 'statepact_keys')",
                schema))));
        return std::stod(out);
      };
      auto rows =
          scale<sp::PostgresBackend>("postgres", io, b, sizes, 8, length, prefix, fill, bytes);
      print("PostgreSQL", 8, "table+index bytes", rows);
    }
    shell(fmt::format("psql -q {} -c {}", shell_quoted(pg_url),
                      shell_quoted(fmt::format("DROP SCHEMA {} CASCADE", schema))));
  }

  const std::string redis_url = env_or("STATEPACT_TEST_REDIS_URL", "");
  if ((which == "all" || which == "redis") && !redis_url.empty()) {
    const auto srv = sp::bench::redis_address(redis_url);
    asio::io_context io(1);
    sp::RedisBackend b(io.get_executor(), redis_url,
                       sp::RedisOptions().key_prefix("scale" + run_id).known_resources(2000000));
    auto used = [&] {
      const std::string out =
          shell(fmt::format("redis-cli -h {} -p {} INFO memory", srv.host, srv.port));
      const auto at = out.find("used_memory:");
      return at == std::string::npos ? 0.0 : std::stod(out.substr(at + 12));
    };
    auto rows = scale<sp::RedisBackend>(
        "redis", io, b, sizes, 8, length, prefix,
        [&](long from, long to) {
          fill_through_api(io, b, prefix, from, to, 64);
          sp::bench::wait_for_aof_rewrite(srv);
        },
        used);
    print("Redis", 8, "bytes of used_memory", rows);
    // Only this run's keys go: they all start with its prefix.
    shell(
        fmt::format("redis-cli -h {0} -p {1} --scan --pattern {2} | xargs -r -n 1000 redis-cli "
                    "-h {0} -p {1} DEL >/dev/null",
                    srv.host, srv.port, shell_quoted("scale" + run_id + ":*")));
  }
  std::printf(
      "\n%lld s per measurement; random resources of the registered ones, each with a live "
      "lease of its own; (vs 1k) is the ratio to the first row of the backend.\n",
      static_cast<long long>(length.count()));
  return 0;
}
