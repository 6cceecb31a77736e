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
#include <functional>
#include <optional>
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
  // The stale writer (when asked for): its token, whether it was seen frozen and continued only
  // once a newer token existed, its exit code and what it reported ("refused" or "landed").
  std::uint64_t stale_token = 0;
  bool stale_continued_after_takeover = false;
  int stale_exit_code = -1;
  std::string stale_verdict;
};

// Asks storage for the resource's fence; and takes the lease over (another owner, after the stale
// writer's ttl) when no contender is left to do it.
struct StaleWriterHooks {
  std::function<std::uint64_t()> current_fence;
  std::function<void()> take_over;
};

// Starts `processes` contenders (the executable at `contender`) at once, waits up to `limit` for
// all, and merges their records.
// With `stale`, one more process runs the stale writer (the contender's `freeze` mode): once it
// stopped itself, it is continued only after the fence moved past its token.
inline RaceRun run_lease_race(const std::string& contender, const std::string& kind,
                              const std::string& url, const std::string& resource, int processes,
                              int wins, std::optional<StaleWriterHooks> stale = std::nullopt,
                              std::chrono::seconds limit = std::chrono::seconds(180)) {
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  // Every process races from the same moment, once all had time to start and connect.
  const long long start_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (std::chrono::steady_clock::now() + std::chrono::seconds(2)).time_since_epoch())
          .count();
  const int all = processes + (stale ? 1 : 0);  // the stale writer is the last one
  for (int p = 0; p < all; ++p) {
    outputs.push_back(fmt::format("/tmp/statepact-race-{}-{}-{}.txt", resource, ::getpid(), p));
    std::vector<std::string> args{contender,
                                  kind,
                                  url,
                                  resource,
                                  fmt::format("process-{}", p),
                                  std::to_string(wins),
                                  outputs.back(),
                                  std::to_string(start_ns)};
    if (p == processes) {
      args[4] = "stale-writer";
      args[5] = "1";
      args.push_back("freeze");
    }
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
  int running = all;
  bool stale_stopped = false, stale_continued = false;
  while (running > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int p = 0; p < all; ++p) {
      if (pids[p] == 0) continue;
      int status = 0;
      const int options = p == processes && !stale_continued ? WNOHANG | WUNTRACED : WNOHANG;
      if (::waitpid(pids[p], &status, options) != pids[p]) continue;
      if (WIFSTOPPED(status)) {
        stale_stopped = true;
        std::ifstream in(outputs[p]);
        in >> run.stale_token;
        continue;
      }
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (p == processes)
        run.stale_exit_code = code;
      else
        run.exit_codes[p] = code;
      pids[p] = 0;
      --running;
    }
    if (stale_stopped && !stale_continued) {
      // Continued only once storage issued a newer token; if every contender is done, take over.
      if (stale->current_fence() > run.stale_token) {
        run.stale_continued_after_takeover = run.stale_token != 0;
        stale_continued = true;
        ::kill(pids[processes], SIGCONT);
      } else if (running == 1) {
        stale->take_over();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t pid : pids)
    if (pid != 0) {
      ::kill(pid, SIGKILL);
      ::kill(pid, SIGCONT);
      ::waitpid(pid, nullptr, 0);
    }
  if (stale) {
    std::ifstream in(outputs[processes]);
    std::uint64_t token = 0;
    in >> token >> run.stale_verdict;
    std::remove(outputs[processes].c_str());
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
