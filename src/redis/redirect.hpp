// A cluster node's redirection of a command: `MOVED <slot> <host>:<port>` (the slot lives on that
// node now: refresh the map and resend there) or `ASK <slot> <host>:<port>` (the slot is being
// migrated and this key already moved: send ASKING then the command to that node, once, without
// changing the map). Pure, so the parsing is tested without a cluster.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "slot.hpp"

namespace statepact::detail {

struct Redirect {
  enum class Kind { moved, ask };
  Kind kind;
  int slot;
  // Empty when the node does not know its own address (Redis answers ":<port>" then): the client
  // uses the host of the node that sent the redirection.
  std::string host;
  int port;
};

// The redirection an error reply carries; nullopt for any other reply, or one whose slot or
// address cannot be read (it is then reported as the server's error, with its text).
inline std::optional<Redirect> parse_redirect(std::string_view reply) {
  Redirect r{};
  if (reply.substr(0, 6) == "MOVED ") {
    r.kind = Redirect::Kind::moved;
    reply.remove_prefix(6);
  } else if (reply.substr(0, 4) == "ASK ") {
    r.kind = Redirect::Kind::ask;
    reply.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = reply.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot_text = reply.substr(0, space);
  auto [slot_end, slot_ec] =
      std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), r.slot);
  if (slot_ec != std::errc() || slot_end != slot_text.data() + slot_text.size() || r.slot < 0 ||
      r.slot >= cluster_slot_count)
    return std::nullopt;
  // The port follows the last ':', so an IPv6 host ("::1:7001") keeps its colons.
  const auto address = reply.substr(space + 1);
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port_text = address.substr(colon + 1);
  auto [port_end, port_ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), r.port);
  if (port_ec != std::errc() || port_end != port_text.data() + port_text.size() || r.port < 1 ||
      r.port > 65535)
    return std::nullopt;
  r.host = std::string(address.substr(0, colon));
  return r;
}

}  // namespace statepact::detail
