// Input checks done before any I/O, shared by every backend so bad input fails identically.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <statepact/commit_request.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

inline constexpr std::size_t max_name_bytes = 256;
inline constexpr milliseconds max_ttl = std::chrono::hours(24 * 7);
// Upper bounds of the other duration options: past them, time arithmetic in some backend
// overflows (a retention of centuries reads as "already expired"), so they are refused up front.
inline constexpr milliseconds max_idempotency_retention = std::chrono::hours(24 * 365);
inline constexpr milliseconds max_timeout = std::chrono::hours(1);  // lock waits, calls, connects
// Values: nesting (each array or object is a level) and size (bytes of the value's JSON text, as
// Value::dump() writes it). What passes reads back equal on every backend, doubles as doubles with
// the same bits (the sign of zero included: PostgreSQL's jsonb would change -0.0 and integral
// doubles from 1e15 up, so that backend writes them in forms jsonb keeps); a non-negative integer
// may come back as an unsigned one, which compares equal.
inline constexpr std::size_t max_value_depth = 100;
inline constexpr std::size_t max_value_bytes = std::size_t(1) << 20;    // 1 MiB per value
inline constexpr std::size_t max_commit_bytes = std::size_t(16) << 20;  // 16 MiB per commit

// Returns the byte offset of the first invalid UTF-8 sequence, or npos. Names (reject_c1) also
// refuse the C1 control characters U+0080..U+009F.
inline std::size_t invalid_utf8_at(std::string_view s, bool reject_c1 = true) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = p[i];
    std::size_t len;
    char32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    // C1 control characters (U+0080..U+009F) are control characters too.
    if (reject_c1 && cp >= 0x80 && cp <= 0x9F) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Names of resources, keys, owners, agents and idempotency keys: 1..256 bytes of valid UTF-8
// without control characters.
inline void validate_name(std::string_view what, std::string_view name) {
  if (name.empty()) throw InvalidArgumentError(fmt::format("{} must not be empty", what));
  if (name.size() > max_name_bytes)
    throw InvalidArgumentError(fmt::format("{} is {} bytes long; at most {} are allowed", what,
                                           name.size(), max_name_bytes));
  bool ascii = true;
  for (std::size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7F)
      throw InvalidArgumentError(
          fmt::format("{} contains a control character (0x{:02x}) at byte {}", what, c, i));
    ascii &= c < 0x80;
  }
  if (ascii) return;  // the common case needs no UTF-8 decoding
  if (auto at = invalid_utf8_at(name); at != std::string_view::npos)
    throw InvalidArgumentError(
        fmt::format("{} is not valid UTF-8 (or holds a control character) at byte {}", what, at));
}

// A duration option: positive and at most `max`.
inline void validate_duration(std::string_view what, milliseconds d, milliseconds max) {
  if (d <= milliseconds::zero() || d > max)
    throw InvalidArgumentError(
        fmt::format("{} must be between 1 ms and {} ms, got {} ms", what, max.count(), d.count()));
}

// A "host:port" address ("[::1]:7001" for IPv6): a host without spaces and a port 1 .. 65535.
// A node's address, its host without an IPv6 literal's brackets.
struct HostPort {
  std::string host;
  int port = 0;
  friend bool operator<(const HostPort& a, const HostPort& b) {
    return a.port != b.port ? a.port < b.port : a.host < b.host;
  }
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// Checks "host:port" and splits it: the one place that reads such a string.
inline HostPort parse_host_port(std::string_view what, std::string_view address) {
  const auto colon = address.rfind(':');
  bool ok = colon != std::string_view::npos && colon > 0 && colon + 1 < address.size() &&
            colon + 6 >= address.size();
  int port = 0;
  if (ok)
    for (char c : address.substr(colon + 1)) {
      ok = ok && c >= '0' && c <= '9';
      port = port * 10 + (c - '0');
    }
  ok = ok && port >= 1 && port <= 65535;
  auto host = ok ? address.substr(0, colon) : std::string_view();
  // An IPv6 host is bracketed, so its own colons are not taken for the port's.
  if (ok && host.find(':') != std::string_view::npos) {
    ok = host.size() > 2 && host.front() == '[' && host.back() == ']';
    if (ok) host = host.substr(1, host.size() - 2);
  }
  for (char c : host) ok = ok && static_cast<unsigned char>(c) > 0x20 && c != '/' && c != '@';
  if (!ok)
    throw InvalidArgumentError(fmt::format(
        "{} must be host:port (e.g. 10.0.0.5:7001 or [::1]:7001), got '{}'", what, address));
  return HostPort{std::string(host), port};
}

namespace value_rules {

// A string every backend stores as it is: valid UTF-8 without U+0000 (PostgreSQL's jsonb refuses
// it). Returns the JSON text's length of the string, quotes and escapes included.
inline std::size_t check_string(std::string_view what, std::string_view s) {
  std::size_t bytes = 2;
  bool ascii = true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == 0)
      throw InvalidArgumentError(
          fmt::format("{} holds U+0000 at byte {}, which not every backend can store", what, i));
    ascii &= c < 0x80;
    bytes += c == '"' || c == '\\' ? 2 : c < 0x20 ? 6 : 1;  // an upper bound for \n and the like
  }
  if (!ascii)
    if (auto at = invalid_utf8_at(s, false); at != std::string_view::npos)
      throw InvalidArgumentError(fmt::format("{} is not valid UTF-8 at byte {}", what, at));
  return bytes;
}

// Walks the value once; returns an upper bound of its JSON text's length.
inline std::size_t check(const Value& v, std::size_t depth) {
  switch (v.type()) {
    case Value::value_t::object:
    case Value::value_t::array: {
      if (depth >= max_value_depth)
        throw InvalidArgumentError(fmt::format(
            "value nests deeper than {} levels of arrays and objects", max_value_depth));
      std::size_t bytes = 2;
      if (v.is_object()) {
        for (const auto& [k, item] : v.items())
          bytes += check_string("an object key in the value", k) + 2 + check(item, depth + 1);
      } else {
        for (const auto& item : v) bytes += 1 + check(item, depth + 1);
      }
      return bytes;
    }
    case Value::value_t::string:
      return check_string("a string in the value", v.get_ref<const std::string&>());
    case Value::value_t::number_float:
      if (!std::isfinite(v.get<double>()))
        throw InvalidArgumentError("value holds NaN or an infinity, which JSON cannot represent");
      return 32;
    case Value::value_t::binary:
      throw InvalidArgumentError("value holds binary data, which JSON cannot represent");
    default:  // null, booleans, integers
      return 24;
  }
}

}  // namespace value_rules

// A value to store: finite numbers, valid UTF-8 without U+0000 in strings and object keys, at
// most max_value_depth levels deep and max_value_bytes of JSON text. Returns its JSON text's size.
inline std::size_t validate_value(const Value& v) {
  std::size_t bytes = value_rules::check(v, 0);
  if (bytes > max_value_bytes) bytes = v.dump().size();  // the bound was loose: measure exactly
  if (bytes > max_value_bytes)
    throw InvalidArgumentError(
        fmt::format("value is {} bytes of JSON; at most {} are allowed", bytes, max_value_bytes));
  return bytes;
}

// How long an acquire may wait for another owner's lease to go: no longer than a lease may live
// (past that, the deadline's arithmetic overflows).
inline void validate_wait(milliseconds wait) {
  if (wait < milliseconds::zero() || wait > max_ttl)
    throw InvalidArgumentError(
        fmt::format("wait must be between 0 and {} ms, got {} ms", max_ttl.count(), wait.count()));
}

inline void validate_ttl(milliseconds ttl) {
  if (ttl <= milliseconds::zero())
    throw InvalidArgumentError(fmt::format("lease ttl must be positive, got {} ms", ttl.count()));
  if (ttl > max_ttl)
    throw InvalidArgumentError(
        fmt::format("lease ttl must be at most 7 days, got {} ms", ttl.count()));
}

// A resource's initial state: a JSON object whose keys are valid names.
inline void validate_initial_state(std::string_view resource, const Value& state) {
  validate_name("resource name", resource);
  if (!state.is_object())
    throw InvalidArgumentError(
        fmt::format("initial state of resource '{}' must be a JSON object (key -> value), got {}",
                    resource, state.type_name()));
  std::size_t bytes = 0;
  for (const auto& [key, value] : state.items()) {
    validate_name("key", key);
    bytes += validate_value(value);
  }
  if (bytes > max_commit_bytes)
    throw InvalidArgumentError(
        fmt::format("initial state of resource '{}' is {} bytes of JSON; at most {} are allowed",
                    resource, bytes, max_commit_bytes));
}

// What every backend checks of a commit request before any I/O (a request built by a Session
// passes; one built by hand may not).
inline void validate_commit(const CommitRequest& req) {
  validate_name("agent id", req.agent_id);
  if (req.idempotency_key) validate_name("idempotency key", *req.idempotency_key);
  if (req.resources.empty()) throw InvalidArgumentError("a commit names no resource");
  for (const auto& r : req.resources) validate_name("resource name", r);
  auto named = [&](const std::string& r) {
    return std::find(req.resources.begin(), req.resources.end(), r) != req.resources.end();
  };
  for (const auto& f : req.fences) {
    if (!named(f.resource))
      throw InvalidArgumentError(
          fmt::format("a fence names resource '{}', which the commit does not", f.resource));
    if (f.token == 0) throw InvalidArgumentError("fence token 0 was never issued");
  }
  for (const auto& c : req.checks) {
    validate_name("key", c.key);
    if (!named(c.resource))
      throw InvalidArgumentError(
          fmt::format("a read check names resource '{}', which the commit does not", c.resource));
  }
  std::size_t bytes = 0;
  for (const auto& w : req.writes) {
    validate_name("key", w.key);
    if (!named(w.resource))
      throw InvalidArgumentError(
          fmt::format("a write names resource '{}', which the commit does not", w.resource));
    if (w.value) bytes += validate_value(*w.value);
  }
  if (bytes > max_commit_bytes)
    throw InvalidArgumentError(fmt::format("commit writes {} bytes of JSON; at most {} are allowed",
                                           bytes, max_commit_bytes));
}

inline void validate_lease(const Lease& lease) {
  validate_name("resource name", lease.resource);
  validate_name("owner", lease.owner);
  if (lease.token == 0) throw InvalidArgumentError("lease token 0 was never issued");
}

}  // namespace statepact::detail
