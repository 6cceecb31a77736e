// The commit functions' calls and answer, without I/O: encode_commit() writes a CommitRequest as
// the JSON body statepact_commit takes, encode_commit_one() as the parameters of the one-resource
// fast path, and decode_commit() reads either one's JSON answer back as a result or a refusal
// (CommitVerdict's names in "error", with the fields each needs).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <statepact/commit_request.hpp>
#include <statepact/detail/commit_verdict.hpp>
#include <statepact/types.hpp>

namespace statepact::detail::pg {

std::string encode_commit(const CommitRequest& req, milliseconds retention);

// The parameters of statepact_commit_one, the fast path for one resource without an idempotency
// key: the resource, the fence token (0 for none), the checks as [[key, expected], ...] and the
// writes as [[key, value], ...] ([key] erases), both in the request's order.
struct CommitOneCall {
  std::string resource;
  Token token = 0;
  std::string checks;
  std::string writes;
  // The most common commit, one write and no checks, as plain parameters for the statement that
  // tries it first: the key and its value as JSON (none: an erase).
  struct OnlyWrite {
    std::string key;
    std::optional<std::string> value;
  };
  std::optional<OnlyWrite> only_write;
};

// The fast path's call, or nothing when the request needs statepact_commit (several resources, an
// idempotency key, or anything naming a resource other than its one). Its answer reads with
// decode_commit.
std::optional<CommitOneCall> encode_commit_one(const CommitRequest& req);

// An answer statepact_commit never gives is a non-retryable statepact::Error ("unexpected answer");
// an unknown refusal (a newer schema) is one too, and says so.
CommitAnswer decode_commit(std::string_view answer);

}  // namespace statepact::detail::pg
