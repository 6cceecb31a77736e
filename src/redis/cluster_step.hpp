// What the router does with a node's reply to a command, without I/O: deliver it, follow a
// redirection, or wait and send again (the cluster is failing over or migrating the slot). Every
// reply that leads to a resend means the command did not run, so a resend is safe even for a
// commit. The router (router.cpp) is the I/O around it.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "redirect.hpp"
#include "reply.hpp"
#include "server_errors.hpp"

namespace statepact::detail {

// Redirections one command follows before giving up: a slot moves at most a few times while a
// command is under way; more means the cluster disagrees with itself.
inline constexpr int max_redirects = 16;

struct ClusterStep {
  enum class Kind { deliver, follow, retry_later };
  Kind kind = Kind::deliver;
  std::optional<Redirect> redirect;  // for follow
};

// `own`: the command's own reply (not a WAIT's behind it). `cluster`: the router already routes by
// slot. A single server never sends a redirection, TRYAGAIN or CLUSTERDOWN, so each of them also
// says the server is a cluster node, and is handled alike before the router has learnt that.
// `redirects` counts the ones followed so far; throws BackendUnavailableError once there are too
// many.
inline ClusterStep cluster_step(const RedisReply& own, [[maybe_unused]] bool cluster,
                                int& redirects) {
  ClusterStep step;
  if (!own.is_error()) return step;
  if (auto redirect = parse_redirect(own.str)) {
    if (++redirects > max_redirects)
      throw BackendUnavailableError(
          fmt::format("redis cluster: the command was redirected {} times (last: {}); the cluster "
                      "disagrees with itself for now",
                      max_redirects, own.str));
    step.kind = ClusterStep::Kind::follow;
    step.redirect = std::move(redirect);
    return step;
  }
  const auto code = redis_error_code(own.str);
  if (code == "TRYAGAIN" || code == "CLUSTERDOWN") step.kind = ClusterStep::Kind::retry_later;
  return step;
}

// The pause before the `attempt`th resend (0 first) of a command the cluster cannot take now:
// 10 ms doubling to 160, plus up to 9 ms of `jitter` so clients do not resend in step.
inline std::chrono::milliseconds retry_pause(int attempt, unsigned jitter) {
  const int base = 10 << std::clamp(attempt, 0, 4);
  return std::chrono::milliseconds(base + static_cast<int>(jitter % 10));
}

}  // namespace statepact::detail
