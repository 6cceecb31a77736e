// statepact_chaos_check: reads the history files of a fault-injection run, runs every check and
// prints what happened (operations by result, faults by kind, anomalies by kind).
// Exit status: 0 no anomaly, 1 anomalies, 2 a history that cannot be read or is malformed.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checker.hpp"

namespace chaos = statepact::chaos;

namespace {

int usage() {
  std::cerr << "usage: statepact_chaos_check [--details N] HISTORY.jsonl...\n"
               "  Checks the histories of one run together; prints operations by result, faults\n"
               "  by kind, anomalies by kind and the first N anomalies (default 10).\n"
               "  Exit: 0 no anomaly, 1 anomalies, 2 unreadable or malformed history.\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t details = 10;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--details" && i + 1 < argc) {
      try {
        details = std::stoul(argv[++i]);
      } catch (const std::exception&) {
        std::cerr << "statepact_chaos_check: --details needs a number, not '" << argv[i] << "'\n";
        return 2;
      }
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "statepact_chaos_check: unknown option '" << a << "'\n";
      return usage();
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return usage();

  chaos::History history;
  std::vector<chaos::Anomaly> anomalies;
  try {
    chaos::HistoryReader reader;
    for (const auto& f : files) {
      std::ifstream in(f);
      if (!in) {
        std::cerr << "statepact_chaos_check: cannot open " << f << "\n";
        return 2;
      }
      reader.read(in, f);
    }
    history = reader.finish();
    anomalies = chaos::check_all(history);
  } catch (const chaos::HistoryError& e) {
    std::cerr << "statepact_chaos_check: malformed history: " << e.what() << "\n";
    return 2;
  }

  std::map<std::string, std::map<chaos::Result, std::size_t>> ops;
  std::map<chaos::Result, std::size_t> totals;
  for (const auto& o : history.operations) {
    ++ops[o.op][o.result];
    ++totals[o.result];
  }
  using chaos::Result;
  fmt::print("{:<14} {:>9} {:>9} {:>9}\n", "operation", "ok", "fail", "unknown");
  for (const auto& [op, r] : ops)
    fmt::print("{:<14} {:>9} {:>9} {:>9}\n", op, r.count(Result::ok) ? r.at(Result::ok) : 0,
               r.count(Result::fail) ? r.at(Result::fail) : 0,
               r.count(Result::unknown) ? r.at(Result::unknown) : 0);
  fmt::print("{:<14} {:>9} {:>9} {:>9}\n\n", "total", totals[Result::ok], totals[Result::fail],
             totals[Result::unknown]);

  std::map<std::string, std::size_t> faults;
  for (const auto& f : history.faults) ++faults[f.kind];
  fmt::print("{:<24} {:>9}\n", "fault", "injected");
  for (const auto& [kind, n] : faults) fmt::print("{:<24} {:>9}\n", kind, n);
  if (faults.empty()) fmt::print("{:<24} {:>9}\n", "(none)", 0);
  fmt::print("\n");

  std::map<std::string, std::size_t> kinds;
  for (const auto& a : anomalies) ++kinds[a.kind];
  fmt::print("{:<24} {:>9}\n", "anomaly", "found");
  for (const auto& [kind, n] : kinds) fmt::print("{:<24} {:>9}\n", kind, n);
  if (kinds.empty()) fmt::print("{:<24} {:>9}\n", "(none)", 0);
  for (std::size_t i = 0; i < anomalies.size() && i < details; ++i)
    fmt::print("\n{}: {}\n", anomalies[i].kind, anomalies[i].detail);
  if (anomalies.size() > details)
    fmt::print("\n... and {} more anomalies\n", anomalies.size() - details);
  return anomalies.empty() ? 0 : 1;
}
