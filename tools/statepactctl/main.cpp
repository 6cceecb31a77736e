// statepactctl: the operator's tool. Talks to a PostgreSQL or Redis deployment by URL; docs/cli.md
// describes every command, its output and its exit codes.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <statepact/inspect.hpp>
#include <statepact/statepact.hpp>
#ifdef STATEPACTCTL_WITH_POSTGRES
#include <statepact/postgres.hpp>
#endif
#ifdef STATEPACTCTL_WITH_REDIS
#include <statepact/redis.hpp>
#endif

#include "output.hpp"

namespace sp = statepact;
using namespace statepactctl;
using nlohmann::json;

namespace {

struct Args {
  std::string url;
  bool as_json = false;
  std::string command;
  std::optional<std::string> glob;
  std::string resource;
  std::optional<std::string> key;
  std::string owner;
  std::string key_prefix = "statepact";  // Redis
  std::string schema = "public";         // PostgreSQL
};

std::string ms_text(sp::milliseconds d) {
  return seconds(d);
}

json lease_json(const sp::LeaseInfo& l) {
  return json{{"resource", l.resource},
              {"owner", l.owner},
              {"token", l.token},
              {"expires_in_ms", l.expires_in.count()},
              {"ttl_ms", l.ttl.count()}};
}

// A user-facing "not this" answer: printed on stdout (or as JSON), exit code 1.
int negative_answer(const Args& a, const std::string& text, json j = nullptr) {
  if (a.as_json)
    print_json(j);
  else
    fmt::print("{}\n", text);
  return Exit::negative;
}

template <class B>
asio::awaitable<int> run_common(B& b, const Args& a) {
  if (a.command == "leases") {
    auto leases = co_await b.list_leases(a.glob);
    if (a.as_json) {
      json out = json::array();
      for (const auto& l : leases) out.push_back(lease_json(l));
      print_json(out);
    } else if (leases.empty()) {
      fmt::print("no live leases\n");
    } else {
      Table t({"RESOURCE", "OWNER", "TOKEN", "EXPIRES IN", "TTL"});
      for (const auto& l : leases)
        t.add(
            {l.resource, l.owner, std::to_string(l.token), ms_text(l.expires_in), ms_text(l.ttl)});
      t.print();
    }
    co_return Exit::ok;
  }
  if (a.command == "lease") {
    auto l = co_await b.lease_holder(a.resource);
    if (!l) co_return negative_answer(a, fmt::format("no live lease on '{}'", a.resource));
    if (a.as_json) {
      print_json(lease_json(*l));
    } else {
      Table t({"RESOURCE", "OWNER", "TOKEN", "EXPIRES IN", "TTL"});
      t.add({l->resource, l->owner, std::to_string(l->token), ms_text(l->expires_in),
             ms_text(l->ttl)});
      t.print();
    }
    co_return Exit::ok;
  }
  if (a.command == "fence") {
    const sp::Token fence = co_await b.current_fence(a.resource);
    if (a.as_json)
      print_json(json{{"resource", a.resource}, {"fence", fence}});
    else
      fmt::print("{}\n", fence);
    co_return Exit::ok;
  }
  if (a.command == "resources") {
    auto resources = co_await b.list_resources(a.glob);
    if (a.as_json) {
      json out = json::array();
      for (const auto& r : resources)
        out.push_back(json{
            {"name", r.name}, {"version", r.version}, {"fence_required", r.policy.fence_required}});
      print_json(out);
    } else if (resources.empty()) {
      fmt::print("no resources\n");
    } else {
      Table t({"RESOURCE", "VERSION", "FENCE REQUIRED"});
      for (const auto& r : resources)
        t.add({r.name, std::to_string(r.version), r.policy.fence_required ? "yes" : "no"});
      t.print();
    }
    co_return Exit::ok;
  }
  if (a.command == "state") {
    std::vector<std::string> names = {a.resource};
    auto snaps = co_await b.snapshot(names);
    const sp::ResourceSnapshot& snap = snaps.at(0);
    if (a.key) {
      auto it = snap.entries.find(*a.key);
      if (it == snap.entries.end() || !it->second.value) {
        const sp::Version v = it == snap.entries.end() ? 0 : it->second.version;
        co_return negative_answer(
            a,
            v ? fmt::format("key '{}' of '{}' was erased at version {}", *a.key, a.resource, v)
              : fmt::format("key '{}' of '{}' was never written", *a.key, a.resource),
            json{{"resource", a.resource}, {"key", *a.key}, {"version", v}, {"value", nullptr}});
      }
      if (a.as_json)
        print_json(json{{"resource", a.resource},
                        {"key", *a.key},
                        {"version", it->second.version},
                        {"value", *it->second.value}});
      else
        fmt::print("{}\n", it->second.value->dump());
      co_return Exit::ok;
    }
    if (a.as_json) {
      json entries = json::object();
      for (const auto& [k, e] : snap.entries)
        entries[k] = json{{"version", e.version}, {"value", e.value ? *e.value : json(nullptr)}};
      print_json(
          json{{"resource", snap.resource}, {"version", snap.version}, {"entries", entries}});
    } else {
      fmt::print("resource '{}' at version {}\n", snap.resource, snap.version);
      Table t({"KEY", "VERSION", "VALUE"});
      for (const auto& [k, e] : snap.entries)
        t.add({k, std::to_string(e.version), e.value ? e.value->dump() : "(erased)"});
      t.print();
    }
    co_return Exit::ok;
  }
  if (a.command == "release") {
    // The holder's token, then the ordinary release as that owner: it ends only that very lease,
    // so a lease that changed hands in between is left alone.
    auto l = co_await b.lease_holder(a.resource);
    if (!l)
      co_return negative_answer(a, fmt::format("no live lease on '{}'", a.resource),
                                json{{"released", false}});
    if (l->owner != a.owner)
      co_return negative_answer(
          a, fmt::format("'{}' is held by '{}', not '{}'", a.resource, l->owner, a.owner),
          json{{"released", false}, {"holder", l->owner}});
    sp::Lease lease{l->resource, l->owner, l->token, l->expires_at, l->ttl};
    const bool released = co_await b.release_lease(lease);
    if (!released)
      co_return negative_answer(a,
                                fmt::format("the lease on '{}' changed before release", a.resource),
                                json{{"released", false}});
    if (a.as_json)
      print_json(json{
          {"released", true}, {"resource", a.resource}, {"owner", a.owner}, {"token", l->token}});
    else
      fmt::print("released '{}' (owner '{}', token {})\n", a.resource, a.owner, l->token);
    co_return Exit::ok;
  }
  if (a.command == "revoke") {
    auto r = co_await b.revoke_lease(a.resource);
    if (!r)
      co_return negative_answer(a, fmt::format("nothing to revoke on '{}'", a.resource),
                                json{{"revoked", false}});
    if (a.as_json)
      print_json(json{{"revoked", true},
                      {"resource", a.resource},
                      {"owner", r->lease.owner},
                      {"token", r->lease.token},
                      {"fence", r->fence}});
    else
      fmt::print("revoked '{}' from '{}' (token {}); fence is now {}\n", a.resource, r->lease.owner,
                 r->lease.token, r->fence);
    co_return Exit::ok;
  }
  co_return -1;  // not a common command
}

template <class Check>
int print_check(const Args& a, const Check& check) {
  if (a.as_json) {
    json out = json::array();
    for (const auto& s : check.settings)
      out.push_back(
          json{{"setting", s.setting}, {"value", s.value}, {"ok", s.ok}, {"advice", s.advice}});
    print_json(json{{"ok", check.ok()}, {"settings", out}});
  } else {
    Table t({"SETTING", "VALUE", "OK", "ADVICE"});
    for (const auto& s : check.settings) t.add({s.setting, s.value, s.ok ? "yes" : "NO", s.advice});
    t.print();
  }
  return check.ok() ? Exit::ok : Exit::negative;
}

#ifdef STATEPACTCTL_WITH_REDIS
asio::awaitable<int> run_redis(asio::any_io_executor ex, const Args& a) {
  sp::RedisBackend b(ex, a.url,
                     sp::RedisOptions().client_name("statepactctl").key_prefix(a.key_prefix));
  if (a.command == "check") {
    auto check = co_await b.check_server();
    co_return print_check(a, check);
  }
  if (a.command == "migrate") {
    // Redis has no schema; what moved between versions is the key form of grouped names.
    const auto up = co_await b.upgrade_key_layout();
    if (a.as_json) {
      print_json(
          json{{"resources", up.resources}, {"keys_moved", up.keys_moved}, {"left", up.left}});
    } else {
      fmt::print("{} resource(s) with a group in the earlier key form, {} key(s) moved\n",
                 up.resources, up.keys_moved);
      for (const auto& l : up.left)
        fmt::print("left in the earlier form (the grouped form was in use; fence kept): {}\n", l);
    }
    co_return Exit::ok;
  }
  co_return co_await run_common(b, a);
}
#endif

#ifdef STATEPACTCTL_WITH_POSTGRES
asio::awaitable<int> run_postgres(asio::any_io_executor ex, const Args& a) {
  sp::PostgresBackend b(
      ex, a.url,
      sp::PostgresOptions().pool_size(1).application_name("statepactctl").schema(a.schema));
  if (a.command == "check") {
    auto check = co_await b.check_server();
    co_return print_check(a, check);
  }
  if (a.command == "migrate") {
    const int version = co_await b.migrate();
    if (a.as_json)
      print_json(json{{"schema_version", version},
                      {"latest", sp::PostgresBackend::latest_schema_version()}});
    else
      fmt::print("schema at version {} (this tool's newest: {})\n", version,
                 sp::PostgresBackend::latest_schema_version());
    co_return Exit::ok;
  }
  co_return co_await run_common(b, a);
}
#endif

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

int exit_code_of(const sp::Error& e) {
  switch (e.code()) {
    case sp::ErrorCode::resource_not_found:
      return Exit::negative;
    case sp::ErrorCode::invalid_argument:
      return Exit::usage;
    case sp::ErrorCode::backend_unavailable:
    case sp::ErrorCode::commit_unknown:
      return Exit::unreachable;
    default:
      return Exit::failure;
  }
}

int run(const Args& a) {
  asio::io_context io;
  int code = Exit::failure;
  std::exception_ptr error;
  auto done = [&](std::exception_ptr e, int c) {
    error = e;
    code = c;
  };
  if (starts_with(a.url, "redis://") || starts_with(a.url, "unix://")) {
#ifdef STATEPACTCTL_WITH_REDIS
    asio::co_spawn(io, run_redis(io.get_executor(), a), done);
#else
    throw sp::InvalidArgumentError("this statepactctl was built without the Redis backend");
#endif
  } else if (starts_with(a.url, "postgresql://") || starts_with(a.url, "postgres://") ||
             a.url.find('=') != std::string::npos) {
#ifdef STATEPACTCTL_WITH_POSTGRES
    asio::co_spawn(io, run_postgres(io.get_executor(), a), done);
#else
    throw sp::InvalidArgumentError("this statepactctl was built without the PostgreSQL backend");
#endif
  } else {
    throw sp::InvalidArgumentError(
        "unknown URL: expected redis://, unix:// (Redis), postgresql:// or a libpq connection "
        "string (PostgreSQL)");
  }
  io.run();
  if (error) std::rethrow_exception(error);
  return code;
}

// What the URL looks like in messages: its password replaced.
std::string shown_url(const std::string& url) {
  return redact(url, secrets_of(url));
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"statepactctl: inspect and administer statepact leases and state", "statepactctl"};
  app.add_option("--url", a.url, "redis://..., unix://..., postgresql://... (or STATEPACT_URL)")
      ->envname("STATEPACT_URL")
      ->required();
  app.add_flag("--json", a.as_json, "JSON output for scripts");
  app.add_option("--key-prefix", a.key_prefix, "Redis: the backend's key prefix (RedisOptions)")
      ->capture_default_str();
  app.add_option("--schema", a.schema, "PostgreSQL: the backend's schema (PostgresOptions)")
      ->capture_default_str();
  app.require_subcommand(1);

  auto* leases =
      app.add_subcommand("leases", "live leases: resource, owner, token, expires in, ttl");
  std::string glob, key;
  auto* leases_glob = leases->add_option("--resource", glob, "only resources matching this glob");
  auto* lease = app.add_subcommand("lease", "the live lease of one resource");
  lease->add_option("resource", a.resource, "resource name")->required();
  auto* fence = app.add_subcommand("fence", "the highest token ever issued for a resource");
  fence->add_option("resource", a.resource, "resource name")->required();
  auto* resources = app.add_subcommand("resources", "registered resources");
  auto* resources_glob = resources->add_option("glob", glob, "only names matching this glob");
  auto* state = app.add_subcommand("state", "a resource's state: values and versions");
  state->add_option("resource", a.resource, "resource name")->required();
  auto* state_key = state->add_option("key", key, "only this key");
  auto* release = app.add_subcommand("release", "end a live lease as its owner would");
  release->add_option("resource", a.resource, "resource name")->required();
  release->add_option("--owner", a.owner, "the owner holding it")->required();
  auto* revoke =
      app.add_subcommand("revoke", "end a lease against its owner's will and fence it off");
  revoke->add_option("resource", a.resource, "resource name")->required();
  app.add_subcommand("migrate",
                     "bring stored data to this tool's version: the PostgreSQL schema, "
                     "or the Redis keys of names with a group");
  app.add_subcommand("check", "report the server settings safety depends on");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? Exit::ok : Exit::usage;
  }
  a.command = app.get_subcommands().front()->get_name();
  if (leases_glob->count() > 0 || resources_glob->count() > 0) a.glob = glob;
  if (state_key->count() > 0) a.key = key;

  try {
    return run(a);
  } catch (const sp::Error& e) {
    fmt::print(stderr, "statepactctl: {} ({}): {}\n", shown_url(a.url), sp::to_string(e.code()),
               redact(e.what(), secrets_of(a.url)));
    return exit_code_of(e);
  } catch (const std::system_error& e) {
    fmt::print(stderr, "statepactctl: {}: {}\n", shown_url(a.url),
               redact(e.what(), secrets_of(a.url)));
    return Exit::unreachable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "statepactctl: {}: {}\n", shown_url(a.url),
               redact(e.what(), secrets_of(a.url)));
    return Exit::failure;
  }
}
