// Waits until the Redis server is not rewriting its AOF. Writing a million keys starts a rewrite
// (a forked child copying the whole data set, on the same two cores and disk), and a row measured
// meanwhile pays for it; the benchmarks measure the backend, not that.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "redis_address.hpp"
#include "shell.hpp"

namespace statepact::bench {

inline void wait_for_aof_rewrite(const RedisAddress& srv) {
  using namespace std::chrono_literals;
  std::this_thread::sleep_for(500ms);  // the server starts one from its timer (10 per second)
  for (int i = 0; i < 600; ++i) {
    const std::string out =
        shell(fmt::format("redis-cli -h {} -p {} INFO persistence", srv.host, srv.port));
    if (out.find("aof_rewrite_in_progress:0") != std::string::npos &&
        out.find("aof_rewrite_scheduled:0") != std::string::npos)
      return;
    std::this_thread::sleep_for(1s);
  }
}

}  // namespace statepact::bench
