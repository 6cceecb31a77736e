// A blocking hiredis client for integration tests: does to the server what an operator would
// (CLIENT LIST, CLIENT KILL, DEL) behind the backend's back.
#pragma once

#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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

}  // namespace statepact::test
