// Runs the built statepactctl against the private servers the test command starts (the URLs in
// STATEPACT_TEST_REDIS_URL and STATEPACT_TEST_POSTGRES_URL) and checks its output, its JSON and
// its exit codes. State is set up and checked through the library itself.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <statepact/postgres.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"

namespace sp = statepact;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct Ran {
  int code = -1;
  std::string out, err;
};

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `env` is prepended as VAR=value words; stderr goes to a file read back afterwards.
Ran ctl(const std::vector<std::string>& args, const std::string& env = "") {
  static int calls = 0;
  const std::string err_file =
      fmt::format("{}/statepactctl_test_{}_{}.err", STATEPACT_TEST_TMP, ::getpid(), ++calls);
  std::string cmd = "env -u STATEPACT_URL " + env + " " + quoted(STATEPACTCTL_PATH);
  for (const auto& a : args) cmd += " " + quoted(a);
  cmd += " 2>" + quoted(err_file);
  Ran r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(err_file);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  std::remove(err_file.c_str());
  return r;
}

std::string env_url(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) FAIL(name << " is not set: start the servers with scripts/servers/*.sh");
  return v;
}

std::string unique_suffix() {
  std::random_device rd;
  return fmt::format("~{:08x}{:08x}", rd(), rd());
}

// The same checks on either server backend; B is its backend type.
template <class B>
void check_backend(const std::string& url, bool postgres) {
  const std::string sfx = unique_suffix();
  const std::string r = "cli-job {x}" + sfx, glob = "cli-job*" + sfx;
  const sp::Lease held = sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<sp::Lease> {
    B b(ex, url);
    sp::Value state = sp::Value::object();
    state["status"] = "new";
    co_await b.register_resource(r, state);
    co_return co_await b.acquire_lease(r, "worker-a", 30s);
  });

  auto listed = ctl({"--url", url, "leases", "--resource", glob});
  CHECK(listed.code == 0);
  CHECK(listed.out.find("RESOURCE") != std::string::npos);
  CHECK(listed.out.find(r) != std::string::npos);  // the real name, not its key encoding
  CHECK(listed.out.find("worker-a") != std::string::npos);

  auto as_json = ctl({"--url", url, "--json", "leases", "--resource", glob});
  REQUIRE(as_json.code == 0);
  const json leases = json::parse(as_json.out);
  REQUIRE(leases.size() == 1);
  CHECK(leases[0]["resource"] == r);
  CHECK(leases[0]["owner"] == "worker-a");
  CHECK(leases[0]["token"] == held.token);
  CHECK(leases[0]["ttl_ms"] == 30000);
  CHECK(leases[0]["expires_in_ms"].get<long long>() > 20000);
  CHECK(leases[0]["expires_in_ms"].get<long long>() <= 30000);

  if (!postgres) {  // another key prefix is another deployment
    auto elsewhere = ctl({"--url", url, "--key-prefix", "elsewhere", "--json", "leases"});
    CHECK(elsewhere.code == 0);
    CHECK(elsewhere.out.find(r) == std::string::npos);
  }

  // STATEPACT_URL stands in for --url.
  auto one = ctl({"--json", "lease", r}, "STATEPACT_URL=" + quoted(url));
  CHECK(one.code == 0);
  CHECK(json::parse(one.out)["owner"] == "worker-a");
  CHECK(ctl({"--url", url, "lease", "cli-none" + sfx}).code == 1);

  auto fence = ctl({"--url", url, "fence", r});
  CHECK(fence.code == 0);
  CHECK(fence.out == fmt::format("{}\n", held.token));

  auto resources = ctl({"--url", url, "--json", "resources", glob});
  REQUIRE(resources.code == 0);
  const json res = json::parse(resources.out);
  REQUIRE(res.size() == 1);
  CHECK(res[0]["name"] == r);
  CHECK(res[0]["version"] == 0);

  auto state = ctl({"--url", url, "--json", "state", r});
  REQUIRE(state.code == 0);
  CHECK(json::parse(state.out)["entries"]["status"]["value"] == "new");
  auto key = ctl({"--url", url, "state", r, "status"});
  CHECK(key.code == 0);
  CHECK(key.out == "\"new\"\n");
  CHECK(ctl({"--url", url, "state", r, "absent"}).code == 1);
  auto missing = ctl({"--url", url, "state", "cli-unregistered" + sfx});
  CHECK(missing.code == 1);
  CHECK(missing.err.find("not registered") != std::string::npos);

  // Release only as the holder; revoke whoever holds it and move the fence past its token.
  auto wrong = ctl({"--url", url, "release", r, "--owner", "worker-b"});
  CHECK(wrong.code == 1);
  CHECK(wrong.out.find("held by 'worker-a'") != std::string::npos);
  auto revoked = ctl({"--url", url, "--json", "revoke", r});
  REQUIRE(revoked.code == 0);
  CHECK(json::parse(revoked.out)["fence"] == held.token + 1);
  CHECK(ctl({"--url", url, "revoke", r}).code == 1);  // nothing left to revoke
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    B b(ex, url);
    auto next = co_await b.acquire_lease(r, "worker-b", 30s);
    CHECK(next.token > held.token + 1);
  });
  auto released = ctl({"--url", url, "release", r, "--owner", "worker-b"});
  CHECK(released.code == 0);
  CHECK(ctl({"--url", url, "lease", r}).code == 1);

  auto check = ctl({"--url", url, "--json", "check"});
  const json report = json::parse(check.out);
  CHECK(check.code == (report["ok"].get<bool>() ? 0 : 1));
  CHECK(report["settings"].size() >= 4);
  auto migrate = ctl({"--url", url, "--json", "migrate"});
  if (postgres) {
    CHECK(migrate.code == 0);
    CHECK(json::parse(migrate.out)["schema_version"] ==
          sp::PostgresBackend::latest_schema_version());
    // The test server runs with fsync off, and check says so.
    CHECK(check.code == 1);
    CHECK(check.out.find("\"fsync\"") != std::string::npos);
  } else {
    // Redis: the key form of grouped names; this server holds none in the earlier form.
    CHECK(migrate.code == 0);
    CHECK(json::parse(migrate.out)["keys_moved"].is_number());
  }
}

}  // namespace

TEST_CASE("statepactctl against Redis", "[cli]") {
  check_backend<sp::RedisBackend>(env_url("STATEPACT_TEST_REDIS_URL"), false);
}

TEST_CASE("statepactctl against PostgreSQL", "[cli]") {
  check_backend<sp::PostgresBackend>(env_url("STATEPACT_TEST_POSTGRES_URL"), true);
}

TEST_CASE("statepactctl: usage errors, unreachable servers, and passwords never shown", "[cli]") {
  CHECK(ctl({"leases"}).code == 2);                                          // no URL
  CHECK(ctl({"--url", "redis://127.0.0.1:1/0"}).code == 2);                  // no command
  CHECK(ctl({"--url", "redis://127.0.0.1:1/0", "release", "r"}).code == 2);  // no --owner
  auto scheme = ctl({"--url", "ftp://u:ftp-secret-1@host/x", "leases"});
  CHECK(scheme.code == 2);
  CHECK(scheme.err.find("ftp-secret-1") == std::string::npos);
  auto glob = ctl({"--url", env_url("STATEPACT_TEST_REDIS_URL"), "leases", "--resource", "[ab"});
  CHECK(glob.code == 2);

  // Nobody listens on port 1: unreachable, and the message names the URL without its password.
  auto redis = ctl({"--url", "redis://user:redis-secret-2@127.0.0.1:1/0", "leases"});
  CHECK(redis.code == 3);
  CHECK(redis.err.find("127.0.0.1") != std::string::npos);
  CHECK(redis.err.find("redis-secret-2") == std::string::npos);
  CHECK(redis.out.find("redis-secret-2") == std::string::npos);
  auto pg = ctl({"--url", "postgresql://postgres:pg-secret-3@127.0.0.1:1/db", "leases"});
  CHECK(pg.code == 3);
  CHECK(pg.err.find("127.0.0.1") != std::string::npos);
  CHECK(pg.err.find("pg-secret-3") == std::string::npos);

  // A password the server refuses (it has none set): a configuration error, password not shown.
  std::string url = env_url("STATEPACT_TEST_REDIS_URL");
  url.replace(0, 8, "redis://:redis-secret-4@");
  auto refused = ctl({"--url", url, "leases"});
  CHECK(refused.code == 4);
  CHECK(!refused.err.empty());
  CHECK(refused.err.find("redis-secret-4") == std::string::npos);
}
