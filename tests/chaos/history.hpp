// A recorded history of a fault-injection run: one JSON object per line, for each invocation and
// completion of a client's operation, and for the start and end of each injected fault.
//
//   {"client": 3, "op": "append", "phase": "invoke", "args": {...}, "mono_ns": 1, "wall_ms": 2}
//   {"client": 3, "op": "append", "phase": "ok", "ret": {...}, "mono_ns": 5, "wall_ms": 2}
//   {"nemesis": "pause-client", "phase": "start", "args": {...}, "mono_ns": 9, "wall_ms": 2}
//   {"client": 3, "op": "hold_act", "phase": "event", "args": {...}, "mono_ns": 7, "wall_ms": 2}
//
// An "event" is something a client did at one instant while an operation of its may be open (a
// hold() body's actions): an ok operation that starts and ends at `mono_ns`.
//
// A completion's phase is "ok", "fail" (the operation certainly did not happen) or "unknown" (it
// may have). `mono_ns` is CLOCK_MONOTONIC, shared by every process on the machine, so events of
// different client processes can be ordered in real time. Pure code: no I/O but reading a stream.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace statepact::chaos {

using json = nlohmann::json;

enum class Result { ok, fail, unknown };

inline const char* to_string(Result r) {
  return r == Result::ok ? "ok" : r == Result::fail ? "fail" : "unknown";
}

// One operation: its invocation paired with its completion. A client that died mid-operation left
// no completion: the result is unknown and `completed_ns` is the end of time.
struct Operation {
  int client = 0;
  std::string op;
  json args;
  Result result = Result::unknown;
  json ret;
  std::int64_t invoked_ns = 0;
  std::int64_t completed_ns = 0;
  std::string where;  // "file:line" of the invocation, for reports
};

struct Fault {
  std::string kind;
  std::int64_t start_ns = 0;
  std::optional<std::int64_t> end_ns;
  json args;  // the start line's (which client, how many seconds, ...)
};

struct History {
  std::vector<Operation> operations;  // in invocation order
  std::vector<Fault> faults;
};

class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline const json& field(const json& line, const char* name, const std::string& where) {
  auto it = line.find(name);
  if (it == line.end()) throw HistoryError(fmt::format("{}: missing field \"{}\"", where, name));
  return *it;
}

inline std::int64_t integer(const json& line, const char* name, const std::string& where) {
  const json& v = field(line, name, where);
  if (!v.is_number_integer())
    throw HistoryError(fmt::format("{}: field \"{}\" must be an integer", where, name));
  return v.get<std::int64_t>();
}

inline std::string text(const json& line, const char* name, const std::string& where) {
  const json& v = field(line, name, where);
  if (!v.is_string())
    throw HistoryError(fmt::format("{}: field \"{}\" must be a string", where, name));
  return v.get<std::string>();
}

}  // namespace detail

// Reads one history file into `into`. A malformed or truncated line is refused with the file and
// line it is on; so is a completion without its invocation, or an invocation while the same client
// still has one open. Invocations never completed become unknown operations.
class HistoryReader {
 public:
  void read(std::istream& in, const std::string& source) {
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = fmt::format("{}:{}", source, number);
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {
        throw HistoryError(fmt::format("{}: not a JSON object (truncated or malformed line): {}",
                                       where, e.what()));
      }
      if (!j.is_object()) throw HistoryError(fmt::format("{}: not a JSON object", where));
      add(j, where);
    }
    if (in.bad()) throw HistoryError(fmt::format("{}: read error", source));
  }

  History finish() {
    for (auto& [client, op] : open_) {
      op.result = Result::unknown;
      op.completed_ns = INT64_MAX;
      history_.operations.push_back(std::move(op));
    }
    open_.clear();
    for (auto& [kind, start] : open_faults_)
      history_.faults.push_back(Fault{kind, start.first, {}, start.second});
    open_faults_.clear();
    std::stable_sort(
        history_.operations.begin(), history_.operations.end(),
        [](const Operation& a, const Operation& b) { return a.invoked_ns < b.invoked_ns; });
    return std::move(history_);
  }

 private:
  void add(const json& j, const std::string& where) {
    const std::string phase = detail::text(j, "phase", where);
    const std::int64_t mono = detail::integer(j, "mono_ns", where);
    detail::integer(j, "wall_ms", where);
    if (j.contains("nemesis")) {
      const std::string kind = detail::text(j, "nemesis", where);
      if (phase == "start") {
        open_faults_.emplace(kind, std::make_pair(mono, j.value("args", json::object())));
      } else if (phase == "end") {
        auto it = open_faults_.find(kind);
        if (it == open_faults_.end())
          throw HistoryError(
              fmt::format("{}: end of fault \"{}\" that never started", where, kind));
        history_.faults.push_back(Fault{kind, it->second.first, mono, it->second.second});
        open_faults_.erase(it);
      } else {
        throw HistoryError(fmt::format(
            "{}: a fault's phase must be \"start\" or \"end\", not \"{}\"", where, phase));
      }
      return;
    }
    const int client = static_cast<int>(detail::integer(j, "client", where));
    const std::string op = detail::text(j, "op", where);
    if (phase == "event") {
      Operation o;
      o.client = client;
      o.op = op;
      o.args = j.value("args", json::object());
      o.result = Result::ok;
      o.invoked_ns = o.completed_ns = mono;
      o.where = where;
      history_.operations.push_back(std::move(o));
      return;
    }
    if (phase == "invoke") {
      if (open_.count(client))
        throw HistoryError(
            fmt::format("{}: client {} invokes \"{}\" while its \"{}\" from {} has not completed",
                        where, client, op, open_.at(client).op, open_.at(client).where));
      Operation o;
      o.client = client;
      o.op = op;
      o.args = j.value("args", json::object());
      o.invoked_ns = mono;
      o.where = where;
      open_.emplace(client, std::move(o));
      return;
    }
    Result r;
    if (phase == "ok")
      r = Result::ok;
    else if (phase == "fail")
      r = Result::fail;
    else if (phase == "unknown")
      r = Result::unknown;
    else
      throw HistoryError(fmt::format(
          "{}: phase must be invoke, event, ok, fail or unknown, not \"{}\"", where, phase));
    auto it = open_.find(client);
    if (it == open_.end() || it->second.op != op)
      throw HistoryError(
          fmt::format("{}: client {} completes \"{}\", which it never invoked", where, client, op));
    Operation o = std::move(it->second);
    open_.erase(it);
    o.result = r;
    o.ret = j.value("ret", json::object());
    o.completed_ns = mono;
    if (o.completed_ns < o.invoked_ns)
      throw HistoryError(fmt::format("{}: completes before its invocation at {}", where, o.where));
    history_.operations.push_back(std::move(o));
  }

  History history_;
  std::map<int, Operation> open_;
  std::multimap<std::string, std::pair<std::int64_t, json>> open_faults_;
};

}  // namespace statepact::chaos
