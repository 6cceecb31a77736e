// A blocking hiredis client for integration tests: does to the server what an operator would
// (CLIENT LIST, CLIENT KILL, DEL) behind the backend's back.
#pragma once

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

#include <unistd.h>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include "../conformance/redis_fixture.hpp"

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

  redisContext* c_ = nullptr;
};

// A private redis-server a test starts and stops itself (restarts, unusual settings), on loopback:
// port STATEPACT_TEST_REDIS_SPARE_PORT, else 57000 + pid % 1000. AOF with fsync always; `extra`
// adds or overrides settings (e.g. "--maxmemory-policy allkeys-lru").
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
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  int port() const { return port_; }
  std::string url() const { return fmt::format("redis://127.0.0.1:{}/0", port_); }

  void start() {
    const auto d = dir_.string();
    const auto cmd = fmt::format(
        "redis-server --port {} --bind 127.0.0.1 --daemonize yes --dir '{}' --appendonly yes "
        "--appendfsync always --save '' --pidfile '{}/redis.pid' --logfile '{}/redis.log' {}",
        port_, d, d, d, extra_);
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot start redis-server");
    for (int i = 0; i < 200 && !ping(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!ping()) throw std::runtime_error("private redis-server does not answer");
  }

  // SHUTDOWN fsyncs the AOF first. Where CONFIG or SHUTDOWN is renamed, the pid file's process is
  // sent SIGTERM, which does the same.
  void stop() {
    if (redisContext* c = redisConnect("127.0.0.1", port_); c && !c->err) {
      if (auto* r = static_cast<redisReply*>(redisCommand(c, "SHUTDOWN"))) freeReplyObject(r);
      redisFree(c);
    } else if (c) {
      redisFree(c);
    }
    if (ping()) {
      std::ifstream pid_file(dir_ / "redis.pid");
      long pid = 0;
      if (pid_file >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), SIGTERM);
    }
    for (int i = 0; i < 200 && ping(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  static int spare_port() {
    if (const char* p = std::getenv("STATEPACT_TEST_REDIS_SPARE_PORT"); p && *p)
      return std::stoi(p);
    return 57000 + static_cast<int>(getpid() % 1000);
  }

 private:
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
