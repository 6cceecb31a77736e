// One script run, without I/O: EVALSHA by the cached SHA, SCRIPT LOAD first when none is cached,
// and EVAL with the script's text after NOSCRIPT (a restart or SCRIPT FLUSH emptied the server's
// cache; NOSCRIPT means nothing ran, so sending the text once is safe even for a commit). The
// driver (RedisImpl::eval) sends command() and hands each reply to on_reply() until it is done.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <statepact/errors.hpp>

#include "reply.hpp"
#include "server_errors.hpp"

namespace statepact::detail {

class ScriptRun {
 public:
  enum class Step { load, evalsha, eval, done };

  // `source` and `name` must outlive the call (they are the scripts' static texts and names).
  ScriptRun(std::string cached_sha, std::string_view source, std::string_view name,
            std::vector<std::string> keys, std::vector<std::string> args)
      : source_(source), name_(name), cmd_(std::make_shared<std::vector<std::string>>()) {
    cmd_->reserve(3 + keys.size() + args.size());
    cmd_->emplace_back("EVALSHA");
    cmd_->push_back(std::move(cached_sha));
    cmd_->push_back(std::to_string(keys.size()));
    for (auto& k : keys) cmd_->push_back(std::move(k));
    for (auto& a : args) cmd_->push_back(std::move(a));
    if ((*cmd_)[1].empty()) {
      step_ = Step::load;
      load_ = std::make_shared<std::vector<std::string>>(
          std::vector<std::string>{"SCRIPT", "LOAD", std::string(source_)});
    }
  }

  Step step() const { return step_; }
  // The command to send now (not done()). Shared with the connection, which may keep it for a
  // resend; it is changed only after its reply is in.
  std::shared_ptr<const std::vector<std::string>> command() const {
    return step_ == Step::load ? load_ : cmd_;
  }
  // SCRIPT LOAD changes nothing, so a lost reply to it may be sent again like a read's.
  bool loading() const { return step_ == Step::load; }
  // The SHA that SCRIPT LOAD answered, for the caller's cache; empty before.
  const std::string& learned_sha() const { return learned_; }

  // The reply to command(). False: command() is the next to send. True: done, result() holds the
  // script's reply. A failed SCRIPT LOAD throws.
  bool on_reply(RedisReply r) {
    switch (step_) {
      case Step::load:
        if (r.is_error()) throw_redis_server_error("SCRIPT LOAD", r.str);
        if (r.type != RedisReply::Type::string || r.str.empty())
          throw Error(ErrorCode::backend_unavailable, "redis: unexpected reply to SCRIPT LOAD");
        learned_ = r.str;
        (*cmd_)[1] = std::move(r.str);
        step_ = Step::evalsha;
        return false;
      case Step::evalsha:
        if (r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0) {
          (*cmd_)[0] = "EVAL";
          (*cmd_)[1] = std::string(source_);
          step_ = Step::eval;
          return false;
        }
        break;
      case Step::eval:
        break;
      case Step::done:
        throw Error(ErrorCode::invalid_argument, "redis: a reply after the script call ended");
    }
    step_ = Step::done;
    result_ = std::move(r);
    return true;
  }

  // The script's reply once done; an error reply throws the error it stands for.
  RedisReply result() && {
    if (result_.is_error()) throw_redis_server_error(name_, result_.str);
    return std::move(result_);
  }

 private:
  std::string_view source_, name_;
  std::shared_ptr<std::vector<std::string>> cmd_, load_;
  Step step_ = Step::evalsha;
  std::string learned_;
  RedisReply result_;
};

}  // namespace statepact::detail
