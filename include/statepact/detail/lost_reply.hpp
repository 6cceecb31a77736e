// What it means when a request's reply never comes, in one model for both server backends. The
// transports (the Redis connection, the PostgreSQL pool and connection threads) only say how the
// reply was lost; what the request may have done decides what the caller is told, here and nowhere
// else.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <statepact/errors.hpp>

namespace statepact::detail {

// What a request may have done on the server once it was sent.
enum class Effect {
  read,            // changes nothing: safe to send again on a fresh connection
  write,           // a lease, registration or policy change: may or may not have happened
  in_transaction,  // a statement of an open transaction: the server rolls it all back
  commit,          // a commit: may have been applied (CommitUnknownError)
};

struct LostReply {
  Effect effect = Effect::write;
  bool has_idempotency_key = false;  // commits: the caller can resend and learn the outcome

  static constexpr LostReply read() { return LostReply{Effect::read, false}; }
  static constexpr LostReply write() { return LostReply{Effect::write, false}; }
  static constexpr LostReply in_transaction() { return LostReply{Effect::in_transaction, false}; }
  static constexpr LostReply commit(bool has_idempotency_key) {
    return LostReply{Effect::commit, has_idempotency_key};
  }

  // Sent once more on a fresh connection when the first one broke under it.
  bool resendable() const { return effect == Effect::read; }
};

// How the reply was lost.
enum class Loss {
  not_sent,      // the request never left the client: nothing happened, whatever it was
  no_reply,      // sent, and no reply came within the deadline
  disconnected,  // sent, and the connection broke before the reply
};

// The error the caller sees. `server` names the backend ("redis", "PostgreSQL"); `what` says what
// happened ("no reply within 400 ms", "connection lost: ...").
inline std::exception_ptr lost_reply_error(std::string_view server, LostReply request, Loss loss,
                                           std::string_view what) {
  if (loss == Loss::not_sent)
    return std::make_exception_ptr(
        BackendUnavailableError(fmt::format("{}: {}; nothing was sent", server, what)));
  switch (request.effect) {
    case Effect::commit:
      return std::make_exception_ptr(CommitUnknownError(
          fmt::format("{}: {} after the commit was sent; it may or may not have been applied",
                      server, what),
          request.has_idempotency_key));
    case Effect::in_transaction:
      return std::make_exception_ptr(BackendUnavailableError(fmt::format(
          "{}: {}; the server rolls the transaction back, nothing was applied", server, what)));
    case Effect::write:
      return std::make_exception_ptr(BackendUnavailableError(
          fmt::format("{}: {}; the operation may or may not have happened", server, what)));
    case Effect::read:
      break;
  }
  return std::make_exception_ptr(BackendUnavailableError(fmt::format("{}: {}", server, what)));
}

}  // namespace statepact::detail
