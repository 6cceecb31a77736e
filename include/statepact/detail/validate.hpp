// Input checks done before any I/O, shared by every backend so bad input fails identically.
#pragma once

#include <chrono>
#include <string_view>

#include <fmt/format.h>

#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

inline constexpr std::size_t max_name_bytes = 256;
inline constexpr milliseconds max_ttl = std::chrono::hours(24 * 7);

// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
inline std::size_t invalid_utf8_at(std::string_view s) {
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
    if (cp >= 0x80 && cp <= 0x9F) return i;
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
  for (const auto& [key, value] : state.items()) validate_name("key", key);
}

inline void validate_lease(const Lease& lease) {
  validate_name("resource name", lease.resource);
  validate_name("owner", lease.owner);
  if (lease.token == 0) throw InvalidArgumentError("lease token 0 was never issued");
}

}  // namespace statepact::detail
