// Where everything lives in Redis. Resource names, keys and idempotency keys are hex-encoded
// inside the key names, so no name can collide with another or break a hash tag, whatever bytes
// it holds ('{', '}', ':', spaces, unicode). Every key of a resource (lease, fence, version, state,
// locks) carries the same hash tag, so it lives in the same cluster slot:
//
//   a plain name:        <prefix>:<kind>:{<hex name>}
//   a name with a group: <prefix>:<kind>:=<hex name>{<hex group>}
//
// A name's group follows Redis's hash-tag rule on the name itself: what lies between its first '{'
// and the first '}' after it, when that is not empty ("{order-17}/items" is in group "order-17").
// Resources of one group share a slot, so one script can touch them all on a cluster. The two
// forms differ in the character after "<kind>:", so a plain name never meets a grouped one.
//
//   <prefix>:lease:<R>              hash  owner, token, exp (server ms), ttl (ms); a released one
//                                         keeps its token
//   <prefix>:fence:<R>              int   highest token ever issued; never deleted
//   (the high-water mark is the larger of the two tokens: either key alone keeps it)
//   <prefix>:version:<R>            int   commits that wrote it; exists = registered
//   <prefix>:state:<R>              hash  key -> "<version> <json>" or "<version>"
//   <prefix>:policy:<R>             hash  fence_required -> '1' | '0'; absent: the default policy
//                                         (a resource registered before policies existed)
//   <prefix>:lock:<R>:<hex key>     hash  lock owner -> "S:<exp ms>" / "X:<exp ms>"
//   <prefix>:lockq:<R>:<hex key>    hash  waiting owner -> "<S|X> <arrival ms> <exp ms>": the
//                                         key's queue, served in arrival order
//   <prefix>:waits                  hash  lock owner -> "<exp ms> <holder> ...": whom a waiting
//                                         owner waits for, and 'sweep' -> when expired records
//                                         were last removed (one slot of its own; the lock
//                                         script never touches it)
//   <prefix>:idem:<R>:<hex key>     hash  fp, result (JSON); expires by retention
//
// where <R> is the resource's part above. An idempotency record lives in the slot of the commit's
// first resource, so a single-resource commit (its record included) touches one slot only.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace statepact::detail {

inline void append_hex(std::string& out, std::string_view s) {
  static constexpr char digits[] = "0123456789abcdef";
  for (unsigned char c : s) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xF]);
  }
}

// The name behind a hex-encoded part of a key; empty when it is not valid hex.
inline std::optional<std::string> decode_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// A resource name's group (see above), or nullopt when it has none.
inline std::optional<std::string_view> resource_group(std::string_view name) {
  const auto open = name.find('{');
  if (open == std::string_view::npos) return std::nullopt;
  const auto close = name.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return std::nullopt;
  return name.substr(open + 1, close - open - 1);
}

class KeyLayout {
 public:
  explicit KeyLayout(std::string prefix) : prefix_(std::move(prefix)) {}

  std::string lease(const std::string& resource) const { return of("lease", resource); }
  std::string fence(const std::string& resource) const { return of("fence", resource); }
  std::string version(const std::string& resource) const { return of("version", resource); }
  std::string state(const std::string& resource) const { return of("state", resource); }
  std::string policy(const std::string& resource) const { return of("policy", resource); }
  std::string lock(const std::string& resource, const std::string& key) const {
    return of("lock", resource, key);
  }
  // The owners waiting for that lock, with when each arrived.
  std::string lock_queue(const std::string& resource, const std::string& key) const {
    return of("lockq", resource, key);
  }
  // The wait-for graph of every lock owner ("<instance hex>:<session number>"): one key, so the
  // deadlock walk names everything it reads.
  std::string waits() const { return prefix_ + ":waits"; }
  std::string idempotency(const std::string& resource, const std::string& key) const {
    return of("idem", resource, key);
  }
  // A SCAN MATCH pattern for every key of a kind whose resource name starts with `name_prefix`,
  // plain or grouped ("[{=]" matches both forms); the key prefix's own glob characters are
  // escaped.
  std::string scan_pattern(std::string_view kind, std::string_view name_prefix) const {
    std::string out = glob_escaped_prefix();
    out.append(":").append(kind).append(":[{=]");
    append_hex(out, name_prefix);
    out.push_back('*');
    return out;
  }
  // The resource name of a "<prefix>:<kind>:<R>" key (no suffix); empty for any other key.
  std::optional<std::string> resource_of(std::string_view kind, std::string_view key) const {
    const std::string head = prefix_ + ":" + std::string(kind) + ":";
    if (key.size() < head.size() + 2 || key.substr(0, head.size()) != head || key.back() != '}')
      return std::nullopt;
    key.remove_prefix(head.size());
    std::optional<std::string> name;
    if (key.front() == '{')
      name = decode_hex(key.substr(1, key.size() - 2));
    else if (key.front() == '=')
      name = decode_hex(key.substr(1, key.find('{') - 1));
    // Only the form this layout writes for that name: a key made by anything else is not ours.
    if (!name) return std::nullopt;
    std::string expected;
    append_part(expected, *name);
    if (expected != key) return std::nullopt;
    return name;
  }
  // A key earlier versions wrote for a name with a group, "<prefix>:<kind>:{<hex name>}" and
  // maybe ":<hex suffix>" (they keyed every name as a plain one), and where this version keeps
  // it. nullopt for any other key, a plain name's included: its key has not moved.
  struct Regrouped {
    std::string resource, kind, to;
  };
  std::optional<Regrouped> regrouped(std::string_view key) const {
    if (key.size() <= prefix_.size() + 1 || key.substr(0, prefix_.size()) != prefix_ ||
        key[prefix_.size()] != ':')
      return std::nullopt;
    key.remove_prefix(prefix_.size() + 1);
    const auto colon = key.find(':');
    if (colon == std::string_view::npos || colon + 1 >= key.size() || key[colon + 1] != '{')
      return std::nullopt;
    const std::string kind(key.substr(0, colon));
    key.remove_prefix(colon + 2);
    const auto close = key.find('}');
    if (close == std::string_view::npos) return std::nullopt;
    auto name = decode_hex(key.substr(0, close));
    if (!name || !resource_group(*name)) return std::nullopt;
    const std::string_view rest = key.substr(close + 1);
    std::optional<std::string> suffix;
    if (!rest.empty()) {
      if (rest.front() != ':' || !(suffix = decode_hex(rest.substr(1)))) return std::nullopt;
    }
    std::string to = suffix ? of(kind, *name, *suffix) : of(kind, *name);
    return Regrouped{std::move(*name), kind, std::move(to)};
  }
  // The key of a kind that versions before the grouped form wrote for a name with a group
  // ("<prefix>:<kind>:{<hex name>}"); nullopt for a plain name, whose key has not moved. It lies
  // in another slot than the grouped form.
  std::optional<std::string> earlier(std::string_view kind, std::string_view resource) const {
    if (!resource_group(resource)) return std::nullopt;
    std::string out;
    out.append(prefix_).append(":").append(kind).append(":{");
    append_hex(out, resource);
    out.push_back('}');
    return out;
  }
  // A SCAN MATCH pattern that finds at least every key `regrouped` moves: a hex name holding a
  // '{' (7b) and, after it, a '}' (7d).
  std::string regrouped_pattern() const { return glob_escaped_prefix() + ":*:{*7b*7d*}*"; }
  // The hash-tag content every key of `resource` shares (what CLUSTER KEYSLOT hashes).
  static std::string slot_tag(std::string_view resource) {
    std::string out;
    append_hex(out, resource_group(resource).value_or(resource));
    return out;
  }

  // Passed where a commit has no idempotency record: in the resource's slot, never read or written
  // (a real record has a ":<hex key>" suffix).
  std::string no_idempotency(const std::string& resource) const { return of("idem", resource); }

 private:
  // The key prefix with its own glob characters escaped, to start a SCAN MATCH pattern.
  std::string glob_escaped_prefix() const {
    std::string out;
    for (char c : prefix_) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    return out;
  }

  // Appends the resource's part of its keys: "{<hex name>}" or "=<hex name>{<hex group>}".
  static void append_part(std::string& out, std::string_view name) {
    if (auto group = resource_group(name)) {
      out.push_back('=');
      append_hex(out, name);
      name = *group;
    }
    out.push_back('{');
    append_hex(out, name);
    out.push_back('}');
  }

  // "<prefix>:<kind>:<R>" and, with a suffix, ":<hex suffix>" after it.
  std::string of(std::string_view kind, std::string_view name,
                 std::optional<std::string_view> suffix = std::nullopt) const {
    std::string out;
    out.reserve(prefix_.size() + kind.size() + 4 * name.size() + 8 +
                (suffix ? 1 + 2 * suffix->size() : 0));
    out.append(prefix_).append(":").append(kind).append(":");
    append_part(out, name);
    if (suffix) {
      out.push_back(':');
      append_hex(out, *suffix);
    }
    return out;
  }

  std::string prefix_;
};

}  // namespace statepact::detail
