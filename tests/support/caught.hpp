// What an error map produced, for the tests of lost_reply.hpp and the servers' error maps.
#pragma once

#include <exception>
#include <string>

#include <statepact/errors.hpp>

namespace statepact::test {

struct Caught {
  ErrorCode code = ErrorCode::backend_unavailable;
  std::string text;
  bool retryable = false;
  bool commit_unknown = false;  // a CommitUnknownError
  bool configuration = false;   // a ConfigurationError

  bool has(const char* part) const { return text.find(part) != std::string::npos; }
};

// Rethrows `e`, which must hold a statepact::Error, and says what it was.
inline Caught caught(std::exception_ptr e) {
  Caught out;
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    out.code = x.code();
    out.text = x.what();
    out.retryable = x.retryable();
    out.commit_unknown = dynamic_cast<const CommitUnknownError*>(&x) != nullptr;
    out.configuration = dynamic_cast<const ConfigurationError*>(&x) != nullptr;
  }
  return out;
}

}  // namespace statepact::test
