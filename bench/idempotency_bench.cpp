// What idempotency records cost the commits that keep them: idempotent one-key commits (session
// with an idempotency key, write, commit) measured with no records stored, with 1M live records,
// and while 1M expired records are being purged, on every backend. Each row gives commits/s, the
// p99 and the longest commit, and their ratios to the first row. A benchmark, never a timed test.
//
// How each backend's backlog is made and purged:
// - memory: the records are committed through the API under a manual clock, which then moves past
//   their retention; the backend purges a few expired records inside each commit.
// - PostgreSQL: the records are inserted in bulk into the backend's table (its own schema, dropped
//   afterwards), then their expiry is moved into the past; every idempotent commit deletes a
//   bounded batch of expired ones.
// - Redis: the records are committed through the API (each key carries its expiry), then their
//   expiries are moved to a few seconds ahead; Redis's own expiry cycle deletes them while the
//   commits run. Twice: spread over as long as writing them took (records expire as fast as they
//   were written, as in use), and all in the same millisecond (the worst case).
//
// Usage: statepact_bench_idempotency [memory|postgres|redis|all] [records, default 1000000]
//        [seconds per measurement, default 3]
// Servers from STATEPACT_TEST_POSTGRES_URL and STATEPACT_TEST_REDIS_URL (a backend without its URL
// is skipped); psql and redis-cli on PATH.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <statepact/postgres.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>
#include <statepact/testing/manual_clock.hpp>

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

struct Row {
  std::string records;
  double per_second = 0, p99_ms = 0, max_ms = 0;
};

// The resource worker `w` commits to: one each, so commits never conflict.
std::string resource_of(const std::string& prefix, int w) {
  return fmt::format("{}-r{}", prefix, w);
}

// Idempotent one-key commits, `workers` at a time for `length`, each with a key of its own
// (`tag` keeps the keys of one measurement apart from every other).
template <class B>
Row measure(asio::io_context& io, sp::Manager<B>& m, const std::string& prefix,
            const std::string& tag, int workers, std::chrono::seconds length) {
  std::vector<double> lat_ms;
  Steady::time_point t0, t1;
  run_to_end(io, [&]() -> asio::awaitable<void> {
    t0 = Steady::now();
    const auto end = t0 + length;
    co_await sp::bench::side_by_side(workers, [&](int w) -> asio::awaitable<void> {
      const std::string r = resource_of(prefix, w);
      for (long i = 0; Steady::now() < end; ++i) {
        const auto s0 = Steady::now();
        auto s = co_await m.session(sp::SessionOptions("bench").resource(r).idempotency_key(
            fmt::format("{}-{}-{}-{}", prefix, tag, w, i)));
        co_await s.write("k", sp::Value(i));
        co_await s.commit();
        lat_ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - s0).count());
      }
    });
    t1 = Steady::now();
  });
  Row row;
  row.per_second =
      static_cast<double>(lat_ms.size()) / std::chrono::duration<double>(t1 - t0).count();
  std::sort(lat_ms.begin(), lat_ms.end());
  row.p99_ms = lat_ms[std::min(lat_ms.size() - 1, lat_ms.size() * 99 / 100)];
  row.max_ms = lat_ms.back();
  return row;
}

// `count` idempotent commits through the API, `workers` at a time, over the first `resources`
// resources (blind writes: they never conflict): each leaves a record.
template <class B>
void fill_through_api(asio::io_context& io, sp::Manager<B>& m, const std::string& prefix,
                      long count, int workers, int resources) {
  run_to_end(io, [&]() -> asio::awaitable<void> {
    co_await sp::bench::side_by_side(workers, [&](int w) -> asio::awaitable<void> {
      const std::string r = resource_of(prefix, w % resources);
      for (long i = w; i < count; i += workers) {
        auto s = co_await m.session(sp::SessionOptions("bench").resource(r).idempotency_key(
            fmt::format("{}-fill-{}", prefix, i)));
        co_await s.write("k", sp::Value(i));
        co_await s.commit();
      }
    });
  });
}

template <class B>
void register_resources(asio::io_context& io, B& b, const std::string& prefix, int workers) {
  run_to_end(io, [&]() -> asio::awaitable<void> {
    for (int w = 0; w < workers; ++w) co_await b.register_resource(resource_of(prefix, w));
  });
}

void print(const char* backend, int workers, const std::vector<Row>& rows,
           const std::string& after) {
  const Row& base = rows.front();
  for (const auto& r : rows)
    std::printf("| %s | %d | %s | %.0f (%.2f) | %.2f (%.2f) | %.1f |\n", backend, workers,
                r.records.c_str(), r.per_second, r.per_second / base.per_second, r.p99_ms,
                r.p99_ms / base.p99_ms, r.max_ms);
  std::printf("| %s | | %s | | | |\n", backend, after.c_str());
  std::fflush(stdout);
}

double seconds_since(Steady::time_point t0) {
  return std::chrono::duration<double>(Steady::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which != "all" && which != "memory" && which != "postgres" && which != "redis") {
    std::fprintf(stderr,
                 "usage: statepact_bench_idempotency [memory|postgres|redis|all] [records] "
                 "[seconds]\n");
    return 2;
  }
  const long records = argc > 2 ? std::max(1000L, std::atol(argv[2])) : 1000000;
  const std::chrono::seconds length(argc > 3 ? std::max(1, std::atoi(argv[3])) : 3);
  const std::string many = fmt::format("{} live", records);
  const std::string expired = fmt::format("{} expired, purged meanwhile", records);
  std::mt19937_64 rng(std::random_device{}());
  const std::string run_id = fmt::format("{:08x}", static_cast<unsigned>(rng()));
  const std::string prefix = "idem-" + run_id;
  std::printf(
      "| backend | workers | idempotency records | commits/s (vs none) | p99 ms (vs none) | "
      "longest ms |\n|---|---|---|---|---|---|\n");

  if (which == "all" || which == "memory") {
    asio::io_context io(1);
    sp::testing::ManualClock clock;
    sp::MemoryBackend b(sp::MemoryOptions().clock(clock.source()));
    sp::Manager<sp::MemoryBackend> m(b);
    register_resources(io, b, prefix, 1);
    std::vector<Row> rows;
    rows.push_back(measure(io, m, prefix, "none", 1, length));
    rows.back().records = "none";
    const auto f0 = Steady::now();
    fill_through_api(io, m, prefix, records, 1, 1);
    std::fprintf(stderr, "memory: %ld records in %.0f s\n", records, seconds_since(f0));
    rows.push_back(measure(io, m, prefix, "live", 1, length));
    rows.back().records = many;
    clock.advance(25h);  // past the default 24 h retention: every record so far has expired
    const double heap_before = static_cast<double>(mallinfo2().uordblks);
    rows.push_back(measure(io, m, prefix, "purge", 1, length));
    rows.back().records = expired;
    print("memory", 1, rows,
          fmt::format("(heap in use {:.0f} MB when they expired, {:.0f} MB after the run)",
                      heap_before / 1e6, static_cast<double>(mallinfo2().uordblks) / 1e6));
  }

  const std::string pg_url = env_or("STATEPACT_TEST_POSTGRES_URL", "");
  if ((which == "all" || which == "postgres") && !pg_url.empty()) {
    const std::string schema = "idem_" + run_id;
    auto psql = [&](const std::string& sql) {
      return shell(fmt::format("psql -qtA -v ON_ERROR_STOP=1 {} -c {}", shell_quoted(pg_url),
                               shell_quoted(fmt::format("SET search_path = {}; {}", schema, sql))));
    };
    {
      asio::io_context io(1);
      sp::PostgresBackend b(io.get_executor(), pg_url,
                            sp::PostgresOptions().schema(schema).pool_size(8));
      sp::Manager<sp::PostgresBackend> m(b);
      run_to_end(io, [&]() -> asio::awaitable<void> { co_await b.migrate(); });
      register_resources(io, b, prefix, 8);
      std::vector<Row> rows;
      rows.push_back(measure(io, m, prefix, "none", 8, length));
      rows.back().records = "none";
      // In bulk: a million commits through the API would take minutes and measure nothing this
      // benchmark is about. Same columns as the records commits write.
      const auto f0 = Steady::now();
      psql(
          fmt::format("INSERT INTO statepact_idempotency (key, fingerprint, result, expires_at) "
                      "SELECT '{}-fill-' || i, 'fill', '{{}}'::jsonb, now() + interval '1 day' "
                      "FROM generate_series(1, {}) i; ANALYZE statepact_idempotency;",
                      prefix, records));
      std::fprintf(stderr, "postgres: %ld records in %.0f s\n", records, seconds_since(f0));
      rows.push_back(measure(io, m, prefix, "live", 8, length));
      rows.back().records = many;
      psql(
          fmt::format("UPDATE statepact_idempotency SET expires_at = now() - interval '1 second' "
                      "WHERE key LIKE '{}-fill-%'",
                      prefix));
      // Alone in its call: VACUUM cannot run in the transaction a multi-statement call makes.
      shell(fmt::format(
          "psql -q -v ON_ERROR_STOP=1 {} -c {}", shell_quoted(pg_url),
          shell_quoted(fmt::format("VACUUM ANALYZE {}.statepact_idempotency", schema))));
      rows.push_back(measure(io, m, prefix, "purge", 8, length));
      rows.back().records = expired;
      const std::string left =
          psql("SELECT count(*) FROM statepact_idempotency WHERE expires_at <= now()");
      print("PostgreSQL", 8, rows,
            fmt::format("({} expired records left after the run)",
                        left.substr(0, left.find_last_not_of("\n") + 1)));
    }
    shell(fmt::format("psql -q {} -c {}", shell_quoted(pg_url),
                      shell_quoted(fmt::format("DROP SCHEMA {} CASCADE", schema))));
  }

  const std::string redis_url = env_or("STATEPACT_TEST_REDIS_URL", "");
  if ((which == "all" || which == "redis") && !redis_url.empty()) {
    const auto srv = sp::bench::redis_address(redis_url);
    const std::string key_prefix = "idem" + run_id;
    const std::string cli = fmt::format("redis-cli -h {} -p {}", srv.host, srv.port);
    auto expired_keys = [&] {
      const std::string out = shell(cli + " INFO stats");
      const auto at = out.find("expired_keys:");
      return at == std::string::npos ? 0L : std::atol(out.c_str() + at + 13);
    };
    const std::string idem_keys = shell_quoted(key_prefix + ":idem:*");
    // Gives every record an expiry, from far enough ahead for one pipe of PEXPIREATs (RESP built
    // by awk) to set them all (a time already past would delete a key instead of expiring it),
    // spread evenly over `spread` in the order SCAN finds them. Returns the first expiry.
    auto expire_records = [&](std::chrono::milliseconds spread) {
      const auto margin = std::chrono::seconds(10 + records / 20000);
      const auto at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch() + margin)
                             .count();
      shell(fmt::format(
          "{0} --scan --pattern {1} | awk -v t={2} -v n={3} -v s={4} '{{ e = sprintf(\"%.0f\", t + "
          "int(((NR - 1) % n) * s / n)); printf "
          "\"*3\\r\\n$9\\r\\nPEXPIREAT\\r\\n$%d\\r\\n%s\\r\\n$%d\\r\\n%s\\r\\n\", "
          "length($0), $0, length(e), e }}' | {0} --pipe >/dev/null",
          cli, idem_keys, at_ms, records, spread.count()));
      const auto first = std::chrono::system_clock::time_point(std::chrono::milliseconds(at_ms));
      if (std::chrono::system_clock::now() >= first)
        throw std::runtime_error("setting the expiries took longer than their margin");
      return first;
    };
    asio::io_context io(1);
    sp::RedisBackend b(io.get_executor(), redis_url, sp::RedisOptions().key_prefix(key_prefix));
    sp::Manager<sp::RedisBackend> m(b);
    register_resources(io, b, prefix, 8);
    std::vector<Row> rows;
    rows.push_back(measure(io, m, prefix, "none", 8, length));
    rows.back().records = "none";
    auto f0 = Steady::now();
    fill_through_api(io, m, prefix, records, 64, 8);
    const auto fill_time =
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - f0);
    std::fprintf(stderr, "redis: %ld records in %.0f s\n", records, seconds_since(f0));
    sp::bench::wait_for_aof_rewrite(srv);
    rows.push_back(measure(io, m, prefix, "live", 8, length));
    rows.back().records = many;
    // As in use: records written over the fill's time expire over the same time, so the server
    // deletes them as fast as they were written. Measured from half way, when the server's expiry
    // cycle has a backlog to work on (it samples keys and keeps going while many have expired).
    auto first = expire_records(fill_time);
    sp::bench::wait_for_aof_rewrite(srv);
    std::this_thread::sleep_until(first + fill_time / 2);
    long expired_before = expired_keys();
    rows.push_back(measure(io, m, prefix, "purge", 8, length));
    rows.back().records = fmt::format("{} expiring as fast as they were written", records);
    const long purged_spread = expired_keys() - expired_before;
    std::this_thread::sleep_until(first + fill_time + 1s);
    // The worst case: a million records expire in the same millisecond.
    f0 = Steady::now();
    fill_through_api(io, m, prefix, records, 64, 8);
    std::fprintf(stderr, "redis: %ld records again in %.0f s\n", records, seconds_since(f0));
    first = expire_records(0ms);
    sp::bench::wait_for_aof_rewrite(srv);
    expired_before = expired_keys();
    std::this_thread::sleep_until(first);
    rows.push_back(measure(io, m, prefix, "purge", 8, length));
    rows.back().records = fmt::format("{} expiring in the same millisecond", records);
    const long purged = expired_keys() - expired_before;
    const std::string left = shell(fmt::format("{} --scan --pattern {} | wc -l", cli, idem_keys));
    print("Redis", 8, rows,
          fmt::format("(keys the server expired during the purge rows: {} and {}; {} records left "
                      "after the last, the run's own included)",
                      purged_spread, purged, left.substr(0, left.find_last_not_of("\n") + 1)));
    shell(fmt::format("{0} --scan --pattern {1} | xargs -r -n 1000 {0} DEL >/dev/null", cli,
                      shell_quoted(key_prefix + ":*")));
  }
  std::printf(
      "\n%lld s per measurement; idempotent one-key commits, each worker on its own resource; "
      "(vs none) is the ratio to the backend's first row.\n",
      static_cast<long long>(length.count()));
  return 0;
}
