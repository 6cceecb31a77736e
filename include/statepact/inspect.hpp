/// @file
/// Optional: what an operator needs from storage beyond the Backend concept: listing leases and
/// resources, one lease's holder, and revoking a lease. A backend that offers it models
/// InspectableBackend; a minimal backend need not. statepactctl and LeaseManager::holder() use it.
#pragma once

#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// A live lease as storage sees it, a snapshot taken at the read. `expires_in` is measured by the
/// backend's own clock at the moment of the read, so it is meaningful on any client whatever its
/// clock says.
struct LeaseInfo {
  std::string resource;        ///< the leased resource
  std::string owner;           ///< the lease's owner
  Token token = 0;             ///< the lease's fencing token
  time_point expires_at{};     ///< the backend's clock: compare only with other backend times
  milliseconds ttl{0};         ///< the ttl of the last acquire or renewal
  milliseconds expires_in{0};  ///< time left at the read, by the backend's clock
  /// Field-wise equality.
  bool operator==(const LeaseInfo&) const = default;
};

/// A registered resource as storage sees it.
struct ResourceInfo {
  std::string name;       ///< the resource's name
  Version version = 0;    ///< commits that wrote it
  ResourcePolicy policy;  ///< its current policy
  /// Field-wise equality.
  bool operator==(const ResourceInfo&) const = default;
};

/// What revoke_lease() ended: the lease as it stood, and the fence it left behind.
struct RevokedLease {
  Lease lease;      ///< the lease as it stood when revoked (it may have been expired already)
  Token fence = 0;  ///< the new high-water mark: lease.token + 1
  /// Field-wise equality.
  bool operator==(const RevokedLease&) const = default;
};

/// A Backend that also offers inspection and revoke. Contracts (docs/backend-concept.md,
/// "Optional: inspection and revoke"):
/// - list_leases(glob): every live lease whose resource name matches the glob (all when empty),
///   sorted by resource name (bytewise);
/// - lease_holder(resource): the live lease of the resource, or empty;
/// - list_resources(glob): every registered resource matching the glob, sorted by name;
/// - revoke_lease(resource): in one atomic step, ends the resource's current lease (live, or
///   expired and not yet taken over: its holder can still write until the fence moves) and raises
///   the high-water mark by one, so the holder's token is fenced off at once and its renewals
///   fail; the next acquire gets a token above the new mark. Empty when there is nothing to revoke
///   (no lease, or it was released). The raised mark is carried by no lease.
///
/// Globs are matched against the real names, byte by byte: `*` any run, `?` one byte, `[abc]`,
/// `[a-z]`, `[!a]` a set, `\x` the byte x. A malformed glob is an InvalidArgumentError.
template <class B>
concept InspectableBackend = Backend<B> &&
    requires(B& b, std::string s, std::optional<std::string> glob) {
  { b.list_leases(glob) } -> std::same_as<asio::awaitable<std::vector<LeaseInfo>>>;
  { b.lease_holder(s) } -> std::same_as<asio::awaitable<std::optional<LeaseInfo>>>;
  { b.list_resources(glob) } -> std::same_as<asio::awaitable<std::vector<ResourceInfo>>>;
  { b.revoke_lease(s) } -> std::same_as<asio::awaitable<std::optional<RevokedLease>>>;
};

namespace detail {

// Checks a glob's syntax (an unclosed '[' or a trailing '\'); InvalidArgumentError otherwise.
inline void validate_glob(std::string_view glob) {
  for (std::size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '\\') {
      if (++i == glob.size()) throw InvalidArgumentError("glob ends with a lone '\\'");
    } else if (glob[i] == '[') {
      std::size_t j = i + 1;
      if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) ++j;
      if (j < glob.size() && glob[j] == ']') ++j;  // a leading ']' is a member
      while (j < glob.size() && glob[j] != ']') j += glob[j] == '\\' ? 2 : 1;
      if (j >= glob.size())
        throw InvalidArgumentError(fmt::format("glob '{}' has an unclosed '['", glob));
      i = j;
    }
  }
}

// fnmatch-like, bytewise, no special meaning for '/' or a leading '.'. The glob is valid.
inline bool glob_match(std::string_view glob, std::string_view name) {
  std::size_t g = 0, n = 0;
  std::size_t star_g = std::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (g < glob.size()) {
      const char c = glob[g];
      if (c == '*') {
        star_g = ++g;
        star_n = n;
        continue;
      }
      if (c == '?') {
        ++g, ++n;
        continue;
      }
      if (c == '[') {
        std::size_t j = g + 1;
        bool negate = false;
        if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) negate = true, ++j;
        bool hit = false, first = true;
        const auto byte = static_cast<unsigned char>(name[n]);
        while (j < glob.size() && (glob[j] != ']' || first)) {
          first = false;
          unsigned char lo = static_cast<unsigned char>(glob[j] == '\\' ? glob[++j] : glob[j]);
          unsigned char hi = lo;
          if (j + 2 < glob.size() && glob[j + 1] == '-' && glob[j + 2] != ']') {
            j += 2;
            hi = static_cast<unsigned char>(glob[j] == '\\' ? glob[++j] : glob[j]);
          }
          if (lo <= byte && byte <= hi) hit = true;
          ++j;
        }
        if (hit != negate) {
          g = j + 1, ++n;
          continue;
        }
      } else {
        const char lit = c == '\\' ? glob[g + 1] : c;
        if (lit == name[n]) {
          g += c == '\\' ? 2 : 1;
          ++n;
          continue;
        }
      }
    }
    if (star_g == std::string_view::npos) return false;
    g = star_g;
    n = ++star_n;
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

// The part of a glob before its first wildcard, unescaped: every match starts with it.
inline std::string glob_literal_prefix(std::string_view glob) {
  std::string out;
  for (std::size_t i = 0; i < glob.size(); ++i) {
    const char c = glob[i];
    if (c == '*' || c == '?' || c == '[') break;
    if (c == '\\') {
      if (i + 1 < glob.size()) out.push_back(glob[++i]);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

inline bool glob_accepts(const std::optional<std::string>& glob, std::string_view name) {
  return !glob || glob->empty() || glob_match(*glob, name);
}

}  // namespace detail

}  // namespace statepact
