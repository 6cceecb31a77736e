#include "commit_codec.hpp"

#include <cstdint>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "jsonb_text.hpp"

namespace statepact::detail::pg {

std::string encode_commit(const CommitRequest& req, milliseconds retention) {
  Value body = Value::object();
  body["resources"] = req.resources;
  Value fences = Value::array();
  for (const auto& f : req.fences) {
    Value x = Value::object();
    x["resource"] = f.resource;
    x["token"] = f.token;
    fences.push_back(std::move(x));
  }
  body["fences"] = std::move(fences);
  Value checks = Value::array();
  for (const auto& c : req.checks) {
    Value x = Value::object();
    x["resource"] = c.resource;
    x["key"] = c.key;
    x["expected"] = c.expected_version;
    checks.push_back(std::move(x));
  }
  body["checks"] = std::move(checks);
  Value writes = Value::array();
  for (const auto& w : req.writes) {
    Value x = Value::object();
    x["resource"] = w.resource;
    x["key"] = w.key;
    if (w.value) x["value"] = *w.value;  // absent: erase
    writes.push_back(std::move(x));
  }
  body["writes"] = std::move(writes);
  if (req.idempotency_key) {
    body["idempotency_key"] = *req.idempotency_key;
    body["fingerprint"] = req.fingerprint;
    body["retention_ms"] = retention.count();
  }
  return jsonb_text(body);
}

std::optional<CommitOneCall> encode_commit_one(const CommitRequest& req) {
  if (req.idempotency_key || req.resources.size() != 1 || req.fences.size() > 1) return {};
  CommitOneCall call;
  call.resource = req.resources.front();
  if (!req.fences.empty()) {
    // Token 0 is refused by statepact_commit's rules; here it would mean "no fence".
    if (req.fences.front().resource != call.resource || req.fences.front().token == 0) return {};
    call.token = req.fences.front().token;
  }
  Value checks = Value::array();
  for (const auto& c : req.checks) {
    if (c.resource != call.resource) return {};
    checks.push_back(Value::array({c.key, c.expected_version}));
  }
  Value writes = Value::array();
  for (const auto& w : req.writes) {
    if (w.resource != call.resource) return {};
    Value x = Value::array({w.key});
    if (w.value) x.push_back(*w.value);  // absent: erase
    writes.push_back(std::move(x));
  }
  call.checks = checks.dump();
  call.writes = jsonb_text(writes);
  if (req.checks.empty() && req.writes.size() == 1) {
    const auto& w = req.writes.front();
    call.only_write = CommitOneCall::OnlyWrite{w.key, std::nullopt};
    if (w.value) call.only_write->value = jsonb_text(*w.value);
  }
  return call;
}

namespace {

CommitAnswer decode(const Value& answer) {
  if (auto it = answer.find("error"); it != answer.end()) {
    const std::string error = it->get<std::string>();
    const auto verdict = named<CommitVerdict>(error);
    if (!verdict)
      throw Error(ErrorCode::backend_unavailable,
                  fmt::format("statepact_commit refused the commit for a reason this client does "
                              "not know ('{}'; a newer schema?); nothing was applied",
                              error));
    auto str = [&](const char* field) { return answer.at(field).get<std::string>(); };
    auto num = [&](const char* field) { return answer.at(field).get<std::uint64_t>(); };
    switch (*verdict) {
      case CommitVerdict::idempotency_key_reused:
        return CommitRefusal::key_reused();
      case CommitVerdict::resource_not_found:
        return CommitRefusal::not_found(str("resource"));
      case CommitVerdict::fence_required:
        return CommitRefusal::no_fence(str("resource"));
      case CommitVerdict::fence:
        return CommitRefusal::bad_fence(str("resource"), num("token"), num("high_water"));
      case CommitVerdict::conflict:
        return CommitRefusal::conflict_on(str("resource"), str("key"), num("expected"),
                                          num("found"));
    }
  }
  CommitResult result;
  for (const auto& [name, version] : answer.at("versions").items())
    result.versions[name] = version.get<Version>();
  result.replayed = answer.at("replayed").get<bool>();
  return result;
}

}  // namespace

CommitAnswer decode_commit(std::string_view text) {
  try {
    return decode(Value::parse(text));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // Parsing or a missing or mistyped field: JSON's own exception never leaves the library.
    throw Error(ErrorCode::backend_unavailable,
                fmt::format("postgres: unexpected answer from statepact_commit ({})", e.what()));
  }
}

}  // namespace statepact::detail::pg
