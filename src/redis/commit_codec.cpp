#include "commit_codec.hpp"

#include <algorithm>

#include <statepact/detail/lost_reply.hpp>

#include "reply_reader.hpp"

namespace statepact::detail {

using namespace reply_reader;

EncodedCommit encode_commit(const CommitRequest& req, const KeyLayout& layout,
                            milliseconds retention, const std::vector<std::string>& lock_keys,
                            const std::string& lock_owner) {
  EncodedCommit out;
  std::vector<std::string>& res = out.resources;
  // Every resource that must exist, once each. A session has a few: a linear search beats a hash
  // map's allocations.
  res.reserve(req.resources.size());
  auto add = [&](const std::string& r) -> std::size_t {
    for (std::size_t i = 0; i < res.size(); ++i)
      if (res[i] == r) return i + 1;
    res.push_back(r);
    return res.size();
  };
  for (const auto& r : req.resources) add(r);
  for (const auto& w : req.writes) add(w.resource);
  for (const auto& c : req.checks) add(c.resource);
  std::vector<std::size_t> unfenced;
  for (const auto& w : req.writes) {
    const std::size_t i = add(w.resource);
    const bool fenced = std::any_of(req.fences.begin(), req.fences.end(),
                                    [&](const FenceCheck& f) { return f.resource == w.resource; });
    if (!fenced && std::find(unfenced.begin(), unfenced.end(), i) == unfenced.end())
      unfenced.push_back(i);
  }
  std::sort(unfenced.begin(), unfenced.end(),
            [&](std::size_t a, std::size_t b) { return res[a - 1] < res[b - 1]; });

  std::vector<std::string>& keys = out.keys;
  keys.reserve(1 + 2 * res.size() + 2 * req.fences.size() + unfenced.size() + lock_keys.size());
  // The record goes to the slot of the first resource in name order, whatever order the request
  // lists them in, so a retry finds it.
  const std::string slot = res.empty() ? std::string() : *std::min_element(res.begin(), res.end());
  keys.push_back(req.idempotency_key ? layout.idempotency(slot, *req.idempotency_key)
                                     : layout.no_idempotency(slot));
  for (const auto& r : res) {
    keys.push_back(layout.version(r));
    keys.push_back(layout.state(r));
  }
  for (const auto& f : req.fences) {
    keys.push_back(layout.fence(f.resource));
    keys.push_back(layout.lease(f.resource));
  }
  for (std::size_t i : unfenced) keys.push_back(layout.policy(res[i - 1]));
  keys.insert(keys.end(), lock_keys.begin(), lock_keys.end());

  std::vector<std::string>& args = out.args;
  args.resize(commit_header_size);
  auto header = [&](CommitArg a) -> std::string& { return args[static_cast<std::size_t>(a) - 1]; };
  header(CommitArg::has_key) = std::string(req.idempotency_key ? "1" : "0");
  header(CommitArg::fingerprint) = req.fingerprint;
  header(CommitArg::retention_ms) = std::to_string(retention.count());
  header(CommitArg::resource_count) = std::to_string(res.size());
  header(CommitArg::fence_count) = std::to_string(req.fences.size());
  header(CommitArg::check_count) = std::to_string(req.checks.size());
  header(CommitArg::write_count) = std::to_string(req.writes.size());
  header(CommitArg::lock_count) = std::to_string(lock_keys.size());
  header(CommitArg::lock_owner) = lock_keys.empty() ? std::string() : lock_owner;
  header(CommitArg::policy_count) = std::to_string(unfenced.size());
  args.reserve(commit_header_size + res.size() + req.fences.size() + unfenced.size() +
               3 * req.checks.size() + 4 * req.writes.size());
  for (const auto& r : res) args.push_back(r);
  for (const auto& f : req.fences) args.push_back(std::to_string(f.token));
  for (std::size_t i : unfenced) args.push_back(std::to_string(i));
  for (const auto& c : req.checks) {
    args.push_back(std::to_string(add(c.resource)));
    args.push_back(c.key);
    args.push_back(std::to_string(c.expected_version));
  }
  for (const auto& w : req.writes) {
    args.push_back(std::to_string(add(w.resource)));
    args.push_back(w.key);
    args.push_back(w.value ? "v" : "t");
    args.push_back(w.value ? w.value->dump() : std::string());
  }
  return out;
}

CommitAnswer decode_commit(const RedisReply& r, const CommitRequest& req,
                           const EncodedCommit& sent) {
  constexpr const char* what = "commit";
  const std::string& tag = str_at(r, 0, what);
  if (tag == "ok") {
    CommitResult result;
    result.replayed = str_at(r, 1, what) == "1";
    if (result.replayed) {
      const Value versions = parse_json(str_at(r, 2, what), what);
      if (!versions.is_object()) malformed(what);
      for (const auto& [name, v] : versions.items()) {
        // Text since versions are stored exactly; a number in a record stored by an earlier
        // version (exact below 1e14).
        if (v.is_string())
          result.versions[name] = parse_u64(v.get_ref<const std::string&>(), what);
        else if (v.is_number_unsigned())
          result.versions[name] = v.get<Version>();
        else
          malformed(what);
      }
    } else {
      if (r.elements.size() % 2 == 0) malformed(what);  // name, version pairs after 3 fields
      for (std::size_t i = 3; i < r.elements.size(); i += 2)
        result.versions[str_at(r, i, what)] = num_at(r, i + 1, what);
    }
    return result;
  }
  const auto verdict = named<CommitVerdict>(tag);
  if (!verdict) malformed(what);
  switch (*verdict) {
    case CommitVerdict::idempotency_key_reused:
      if (!req.idempotency_key) malformed(what);
      return CommitRefusal::key_reused();
    case CommitVerdict::resource_not_found:
      return CommitRefusal::not_found(nth(sent.resources, num_at(r, 1, what), what));
    case CommitVerdict::fence_required:
      return CommitRefusal::no_fence(nth(sent.resources, num_at(r, 1, what), what));
    case CommitVerdict::fence: {
      const FenceCheck& f = nth(req.fences, num_at(r, 1, what), what);
      return CommitRefusal::bad_fence(f.resource, f.token, num_at(r, 2, what));
    }
    case CommitVerdict::conflict: {
      const ReadCheck& c = nth(req.checks, num_at(r, 1, what), what);
      return CommitRefusal::conflict_on(c.resource, c.key, c.expected_version, num_at(r, 2, what));
    }
  }
  malformed(what);
}

CommitAnswer commit_answer(const RedisReply& reply, const CommitRequest& req,
                           const EncodedCommit& sent) {
  try {
    return decode_commit(reply, req, sent);
  } catch (const Error& e) {
    std::rethrow_exception(commit_outcome_unknown(req, e.what()));
  }
}

std::exception_ptr commit_outcome_unknown(const CommitRequest& req, std::string_view why) {
  // The message names the server once.
  if (why.substr(0, 7) == "redis: ") why.remove_prefix(7);
  return lost_reply_error("redis", LostReply::commit(req.idempotency_key.has_value()),
                          Loss::no_reply, why);
}

}  // namespace statepact::detail
