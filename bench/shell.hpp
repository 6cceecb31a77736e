// The benchmarks' way to run the servers' own tools (psql, pgbench, redis-cli, redis-benchmark):
// a shell command's output, failing loudly, and arguments quoted for the shell.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace statepact::bench {

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Runs a shell command and returns what it printed (stderr too); throws if it failed.
inline std::string shell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + cmd);
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  if (pclose(p) != 0) throw std::runtime_error(fmt::format("failed: {}\n{}", cmd, out));
  return out;
}

inline std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace statepact::bench
