// The commit function's call and answer, without I/O: encode_commit() writes a CommitRequest as
// the JSON body statepact_commit takes, decode_commit() reads its JSON answer back as a result or
// a refusal (CommitVerdict's names in "error", with the fields each needs).
#pragma once

#include <string>
#include <string_view>

#include <statepact/commit_request.hpp>
#include <statepact/detail/commit_verdict.hpp>
#include <statepact/types.hpp>

namespace statepact::detail::pg {

std::string encode_commit(const CommitRequest& req, milliseconds retention);

// An answer statepact_commit never gives is a non-retryable statepact::Error ("unexpected answer");
// an unknown refusal (a newer schema) is one too, and says so.
CommitAnswer decode_commit(std::string_view answer);

}  // namespace statepact::detail::pg
