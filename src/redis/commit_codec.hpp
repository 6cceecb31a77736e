// The commit script's call and answer, without I/O: encode_commit() lays a CommitRequest out as the
// script's KEYS and ARGV, decode_commit() reads its reply back as a result or a refusal.
//
// KEYS: the idempotency record (or a placeholder in the first resource's slot, never touched);
//   version and state per resource; fence and lease per fence; policy per written resource that
//   carries no fence (in name order: the first refused is reported); the session's lock keys.
// ARGV: the header slots of CommitArg, then resource names; fence tokens; resource index per policy
//   key; (resource index, key, expected version) per check; (resource index, key, 'v'|'t', json)
//   per write. Resource indexes are 1-based, as Lua counts.
// Reply: {'ok', '0', '', name, version, ...} applied | {'ok', '1', result json} replayed (the
//   json maps each name to its version as a string: cjson would round numbers to 14 digits) |
//   {'<verdict>', ...} refused (CommitVerdict's names: resource_not_found i, fence j high-water,
//   fence_required i, conflict k found, idempotency_key_reused).
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <statepact/commit_request.hpp>
#include <statepact/detail/commit_verdict.hpp>
#include <statepact/types.hpp>

#include "key_layout.hpp"
#include "reply.hpp"

namespace statepact::detail {

// ARGV's header slots (1-based). The commit script names the same slots with the same numbers, and
// a unit test compares the two.
enum class CommitArg : std::size_t {
  has_key = 1,     // '1' when the commit has an idempotency key
  fingerprint,     // of the commit, stored with the key
  retention_ms,    // how long the key's record is kept
  resource_count,  // resources (names follow the header)
  fence_count,
  check_count,
  write_count,
  lock_count,  // the session's lock keys, released with the commit
  lock_owner,  // whose entries those are ('' without locks)
  policy_count,
};
inline constexpr std::size_t commit_header_size = static_cast<std::size_t>(CommitArg::policy_count);

struct EncodedCommit {
  std::vector<std::string> resources;  // what the reply's resource indexes point to
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

EncodedCommit encode_commit(const CommitRequest& req, const KeyLayout& layout,
                            milliseconds retention, const std::vector<std::string>& lock_keys,
                            const std::string& lock_owner);

// A reply the script never gives is a non-retryable statepact::Error ("unexpected reply").
CommitAnswer decode_commit(const RedisReply& reply, const CommitRequest& req,
                           const EncodedCommit& sent);

// decode_commit on the reply to a commit that was sent: one it cannot read leaves the commit's
// outcome unknown (CommitUnknownError), as a lost reply does.
CommitAnswer commit_answer(const RedisReply& reply, const CommitRequest& req,
                           const EncodedCommit& sent);

// The error for a failure after the commit script was sent (`why` says which): its outcome is
// unknown.
std::exception_ptr commit_outcome_unknown(const CommitRequest& req, std::string_view why);

}  // namespace statepact::detail
