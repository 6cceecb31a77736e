// Where everything lives in Redis. Resource names, keys and idempotency keys are hex-encoded
// inside the key names, so no name can collide with another or break a hash tag, whatever bytes
// it holds ('{', '}', ':', spaces, unicode). The encoded resource is the hash tag: every key of a
// resource (lease, fence, version, state, locks) lives in the same cluster slot.
//
//   <prefix>:lease:{<hex resource>}              hash  owner, token, exp (server ms), ttl (ms);
//                                                      a released one keeps its token
//   <prefix>:fence:{<hex resource>}              int   highest token ever issued; never deleted
//   (the high-water mark is the larger of the two tokens: either key alone keeps it)
//   <prefix>:version:{<hex resource>}            int   commits that wrote it; exists = registered
//   <prefix>:state:{<hex resource>}              hash  key -> "<version> <json>" or "<version>"
//   <prefix>:policy:{<hex resource>}             hash  fence_required -> '1' | '0'; absent: the
//                                                      default policy (a resource registered
//                                                      before policies existed)
//   <prefix>:lock:{<hex resource>}:<hex key>     hash  lock owner -> "S:<exp ms>" / "X:<exp ms>"
//   <prefix>:lockq:{<hex resource>}:<hex key>    hash  waiting owner -> "<S|X> <arrival ms>
//                                                      <exp ms>": the key's queue, served in
//                                                      arrival order
//   <prefix>:waits                               hash  lock owner -> "<exp ms> <holder> ...": whom
//                                                      a waiting owner waits for (one slot of its
//                                                      own; the lock script never touches it)
//   <prefix>:idem:{<hex resource>}:<hex key>     hash  fp, result (JSON); expires by retention
//
// An idempotency record lives in the slot of the commit's first resource, so a single-resource
// commit (its record included) touches one slot only.
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
  // A SCAN MATCH pattern for every key of a kind whose (hex) resource name starts with
  // `name_prefix`; the key prefix's own glob characters are escaped.
  std::string scan_pattern(std::string_view kind, std::string_view name_prefix) const {
    std::string out;
    for (char c : prefix_) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.append(":").append(kind).append(":{");
    append_hex(out, name_prefix);
    out.push_back('*');
    return out;
  }
  // The resource name of a "<prefix>:<kind>:{<hex>}" key; empty for any other key.
  std::optional<std::string> resource_of(std::string_view kind, std::string_view key) const {
    const std::string head = prefix_ + ":" + std::string(kind) + ":{";
    if (key.size() < head.size() + 1 || key.substr(0, head.size()) != head || key.back() != '}')
      return std::nullopt;
    return decode_hex(key.substr(head.size(), key.size() - head.size() - 1));
  }

  // Passed where a commit has no idempotency record: in the resource's slot, never read or written
  // (a real record has a ":<hex key>" suffix).
  std::string no_idempotency(const std::string& resource) const { return of("idem", resource); }

 private:
  // "<prefix>:<kind>:{<hex name>}" and, with a suffix, ":<hex suffix>" after it: built in one
  // buffer, since every operation makes a few of these.
  std::string of(std::string_view kind, std::string_view name,
                 std::optional<std::string_view> suffix = std::nullopt) const {
    std::string out;
    out.reserve(prefix_.size() + kind.size() + 2 * name.size() + 5 +
                (suffix ? 1 + 2 * suffix->size() : 0));
    out.append(prefix_).append(":").append(kind).append(":{");
    append_hex(out, name);
    out.push_back('}');
    if (suffix) {
      out.push_back(':');
      append_hex(out, *suffix);
    }
    return out;
  }

  std::string prefix_;
};

}  // namespace statepact::detail
