// Several processes race for one lease (tests/integration/lease_race_contender.cpp is one of them).
// Each records, per win, its token and the interval from "acquisition returned" to "release about
// to be sent": that interval lies inside the time storage considered it the owner, so two intervals
// that overlap mean two live owners at once.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

extern char** environ;

namespace statepact::test {

struct RaceWin {
  std::uint64_t token = 0;
  long long acquired_ns = 0, releasing_ns = 0;
  int process = 0;
};

struct RaceVerdict {
  std::size_t wins = 0;
  int repeated_tokens = 0;  // a token won twice
  int out_of_order = 0;     // ordered by acquisition time, a token not above the one before
  int overlaps = 0;         // a hold that began before the previous one ended
  int handoffs = 0;         // a win by another process than the win before: the race was real
  std::uint64_t max_token = 0;
};

// Pure: what the merged records say about the race.
inline RaceVerdict judge_race(std::vector<RaceWin> wins) {
  RaceVerdict v;
  v.wins = wins.size();
  std::sort(wins.begin(), wins.end(),
            [](const RaceWin& a, const RaceWin& b) { return a.acquired_ns < b.acquired_ns; });
  std::vector<std::uint64_t> tokens;
  for (std::size_t i = 0; i < wins.size(); ++i) {
    tokens.push_back(wins[i].token);
    v.max_token = std::max(v.max_token, wins[i].token);
    if (i == 0) continue;
    if (wins[i].token <= wins[i - 1].token) ++v.out_of_order;
    if (wins[i].acquired_ns < wins[i - 1].releasing_ns) ++v.overlaps;
    if (wins[i].process != wins[i - 1].process) ++v.handoffs;
  }
  std::sort(tokens.begin(), tokens.end());
  for (std::size_t i = 1; i < tokens.size(); ++i)
    if (tokens[i] == tokens[i - 1]) ++v.repeated_tokens;
  return v;
}

struct RaceRun {
  std::vector<int> exit_codes;  // per process; -1 if it did not end in time and was killed
  std::vector<RaceWin> wins;
};

// Starts `processes` contenders (the executable at `contender`) at once, waits up to `limit` for
// all, and merges their records.
inline RaceRun run_lease_race(const std::string& contender, const std::string& kind,
                              const std::string& url, const std::string& resource, int processes,
                              int wins, std::chrono::seconds limit = std::chrono::seconds(180)) {
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  // Every process races from the same moment, once all had time to start and connect.
  const long long start_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (std::chrono::steady_clock::now() + std::chrono::seconds(2)).time_since_epoch())
          .count();
  for (int p = 0; p < processes; ++p) {
    outputs.push_back(fmt::format("/tmp/statepact-race-{}-{}-{}.txt", resource, ::getpid(), p));
    std::vector<std::string> args{contender,
                                  kind,
                                  url,
                                  resource,
                                  fmt::format("process-{}", p),
                                  std::to_string(wins),
                                  outputs.back(),
                                  std::to_string(start_ns)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ); rc != 0) {
      for (pid_t started : pids) ::kill(started, SIGKILL);
      throw std::runtime_error(fmt::format("posix_spawn {} failed: error {}", argv[0], rc));
    }
    pids.push_back(pid);
  }
  RaceRun run;
  run.exit_codes.assign(processes, -1);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int running = processes;
  while (running > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int p = 0; p < processes; ++p) {
      if (pids[p] == 0) continue;
      int status = 0;
      if (::waitpid(pids[p], &status, WNOHANG) == pids[p]) {
        run.exit_codes[p] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[p] = 0;
        --running;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t pid : pids)
    if (pid != 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  for (int p = 0; p < processes; ++p) {
    std::ifstream in(outputs[p]);
    RaceWin w;
    w.process = p;
    while (in >> w.token >> w.acquired_ns >> w.releasing_ns) run.wins.push_back(w);
    std::remove(outputs[p].c_str());
  }
  return run;
}

}  // namespace statepact::test
