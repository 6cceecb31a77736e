// A blocking hiredis client for integration tests: does to the server what an operator would
// (CLIENT LIST, CLIENT KILL, DEL) behind the backend's back.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include "../conformance/redis_fixture.hpp"
#include "../support/ports.hpp"

namespace statepact::test {

inline std::string random_hex() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

class RedisAdmin {
 public:
  RedisAdmin() {
    // Only the redis://host:port/db form the test scripts use.
    std::string url = redis_test_url();
    std::string rest = url.substr(url.find("://") + 3);
    rest = rest.substr(0, rest.find('/'));
    const auto colon = rest.rfind(':');
    const std::string host = rest.substr(0, colon);
    const int port = colon == std::string::npos ? 6379 : std::stoi(rest.substr(colon + 1));
    connect(host, port);
  }
  explicit RedisAdmin(int port) { connect("127.0.0.1", port); }
  ~RedisAdmin() { redisFree(c_); }
  RedisAdmin(const RedisAdmin&) = delete;
  RedisAdmin& operator=(const RedisAdmin&) = delete;

  // Ids of the connections that called themselves `name`.
  std::vector<std::string> clients_named(const std::string& name) {
    std::vector<std::string> ids;
    auto* r = static_cast<redisReply*>(redisCommand(c_, "CLIENT LIST"));
    if (!r) throw std::runtime_error("CLIENT LIST failed");
    std::istringstream lines(std::string(r->str, r->len));
    freeReplyObject(r);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" name=" + name + " ") == std::string::npos) continue;
      const auto id = line.substr(3, line.find(' ') - 3);  // "id=<n> addr=..."
      ids.push_back(id);
    }
    return ids;
  }

  // Every key matching a glob pattern (SCAN, so it never blocks the server).
  std::vector<std::string> keys_matching(const std::string& pattern) {
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
      auto* r = static_cast<redisReply*>(redisCommand(
          c_, "SCAN %s MATCH %b COUNT 1000", cursor.c_str(), pattern.data(), pattern.size()));
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        if (r) freeReplyObject(r);
        throw std::runtime_error("SCAN failed");
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      for (std::size_t i = 0; i < r->element[1]->elements; ++i)
        keys.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
      freeReplyObject(r);
    } while (cursor != "0");
    return keys;
  }

  // The flags field of CLIENT LIST for the connection called `name` ("" if there is none); a
  // client whose command waits in the server (blocked, or postponed by CLIENT PAUSE) shows "b".
  std::string client_flags(const std::string& name) { return client_field(name, "flags"); }

  // One field of CLIENT LIST (flags, idle, cmd, ...) for the connection called `name` ("" if there
  // is none).
  std::string client_field(const std::string& name, const std::string& field) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, "CLIENT LIST"));
    if (!r) throw std::runtime_error("CLIENT LIST failed");
    std::istringstream lines(std::string(r->str, r->len));
    freeReplyObject(r);
    const std::string tag = " " + field + "=";
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" name=" + name + " ") == std::string::npos) continue;
      const auto at = line.find(tag);
      if (at == std::string::npos) return "";
      const auto from = at + tag.size();
      return line.substr(from, line.find(' ', from) - from);
    }
    return "";
  }

  // CLIENT PAUSE ... WRITE: the server holds back every write (and every script) until
  // unpause() or `ms` pass; reads still run.
  void pause_writes(int ms) { simple(fmt::format("CLIENT PAUSE {} WRITE", ms)); }
  void unpause() { simple("CLIENT UNPAUSE"); }

  int kill_clients_named(const std::string& name) {
    int killed = 0;
    for (const auto& id : clients_named(name)) {
      auto* r = static_cast<redisReply*>(redisCommand(c_, "CLIENT KILL ID %s", id.c_str()));
      if (r && r->type == REDIS_REPLY_INTEGER) killed += static_cast<int>(r->integer);
      if (r) freeReplyObject(r);
    }
    return killed;
  }

  // Any command; the reply's text (string, status or error) or its integer as text.
  std::string command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (!r) throw std::runtime_error("redis admin command failed");
    std::string out = r->type == REDIS_REPLY_INTEGER ? std::to_string(r->integer)
                      : r->str                       ? std::string(r->str, r->len)
                                                     : std::string();
    freeReplyObject(r);
    return out;
  }
  long long dbsize() { return std::stoll(command({"DBSIZE"})); }

 private:
  void connect(const std::string& host, int port) {
    c_ = redisConnect(host.c_str(), port);
    if (!c_ || c_->err) throw std::runtime_error("admin connection to redis failed");
  }

  void simple(const std::string& command) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, command.c_str()));
    const bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (!ok) throw std::runtime_error(command + " failed");
  }

  redisContext* c_ = nullptr;
};

// A private redis-server a test starts, stops, crashes and restarts itself, on loopback: port
// STATEPACT_TEST_REDIS_SPARE_PORT, else one reserved for this process (no two runs share it). AOF
// with fsync always; `extra` adds or overrides settings (e.g. "--maxmemory-policy allkeys-lru").
class PrivateRedis {
 public:
  explicit PrivateRedis(std::string extra = "")
      : port_(spare_port()),
        dir_(std::filesystem::temp_directory_path() /
             fmt::format("statepact-redis-private-{}-{}", getpid(), port_)),
        extra_(std::move(extra)) {
    std::filesystem::create_directories(dir_);
    start();
  }
  ~PrivateRedis() {
    if (running()) {
      if (redisContext* c = redisConnect("127.0.0.1", port_)) {
        if (auto* r = redisCommand(c, "SHUTDOWN NOSAVE")) freeReplyObject(r);
        redisFree(c);
      }
      // Where SHUTDOWN is renamed, SIGTERM does the same.
      if (!wait_gone(pid()) && pid() > 0) ::kill(pid(), SIGTERM);
      wait_gone(pid());
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  int port() const { return port_; }
  std::string url() const { return fmt::format("redis://127.0.0.1:{}/0", port_); }

  // Starts the server and waits until it answers; it must be a new process of ours.
  void start() {
    const auto d = dir_.string();
    const auto cmd = fmt::format(
        "redis-server --port {} --bind 127.0.0.1 --daemonize yes --dir '{}' --appendonly yes "
        "--appendfsync always --save '' --pidfile '{}/redis.pid' --logfile '{}/redis.log' {}",
        port_, d, d, d, extra_);
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot start redis-server");
    for (int i = 0; i < 500 && !ping(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!ping()) throw std::runtime_error("private redis-server does not answer");
  }

  // A clean stop: SHUTDOWN (the AOF is fsynced first). Throws unless the process is gone.
  void stop() {
    const pid_t old = pid();
    redisContext* c = redisConnect("127.0.0.1", port_);
    if (!c || c->err) {
      if (c) redisFree(c);
      throw std::runtime_error("cannot connect to stop the private redis-server");
    }
    if (auto* r = redisCommand(c, "SHUTDOWN")) freeReplyObject(r);  // no reply when it works
    redisFree(c);
    if (!wait_gone(old)) throw std::runtime_error("redis-server did not stop");
  }

  // A crash: SIGKILL, nothing flushed on the way out. Throws unless the process is gone.
  void kill() {
    const pid_t old = pid();
    if (old <= 0 || ::kill(old, SIGKILL) != 0) throw std::runtime_error("cannot kill redis-server");
    if (!wait_gone(old)) throw std::runtime_error("redis-server survived SIGKILL");
  }

  // INFO server's run_id: a new one for every start of the process.
  std::string run_id() const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    std::string id;
    if (c && !c->err) {
      if (auto* r = static_cast<redisReply*>(redisCommand(c, "INFO server"))) {
        if (r->type == REDIS_REPLY_STRING) {
          const std::string info(r->str, r->len);
          const auto at = info.find("run_id:");
          if (at != std::string::npos) id = info.substr(at + 7, 40);
        }
        freeReplyObject(r);
      }
    }
    if (c) redisFree(c);
    if (id.size() != 40) throw std::runtime_error("no run_id in INFO server");
    return id;
  }

  bool running() const { return ping(); }

 private:
  // STATEPACT_TEST_REDIS_SPARE_PORT if set, else a port reserved for this process.
  static int spare_port() {
    if (const char* p = std::getenv("STATEPACT_TEST_REDIS_SPARE_PORT"); p && *p)
      return std::stoi(p);
    return reserve_loopback_port();
  }

  pid_t pid() const {
    std::ifstream in(dir_ / "redis.pid");
    pid_t p = 0;
    in >> p;
    return p;
  }

  // The process is gone (not even a zombie of ours: redis-server daemonized, so init reaps it).
  static bool wait_gone(pid_t p) {
    for (int i = 0; i < 500; ++i) {
      if (p <= 0 || (::kill(p, 0) != 0 && errno == ESRCH)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  bool ping() const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    bool ok = false;
    if (c && !c->err) {
      if (auto* r = static_cast<redisReply*>(redisCommand(c, "PING"))) {
        ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
      }
    }
    if (c) redisFree(c);
    return ok;
  }

  int port_;
  std::filesystem::path dir_;
  std::string extra_;
};

}  // namespace statepact::test
