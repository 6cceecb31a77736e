// Enumerations whose values have names on the wire (a script's or function's answer): one table
// per enumeration gives both directions, so a name is written once.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace statepact::detail {

template <class E>
struct Named {
  E value;
  std::string_view name;
};

template <class E, std::size_t N>
constexpr std::string_view name_in(const Named<E> (&table)[N], E value) {
  for (const auto& n : table)
    if (n.value == value) return n.name;
  return "?";
}

// Empty for a name the table does not hold (an answer of a newer server-side version).
template <class E, std::size_t N>
constexpr std::optional<E> value_named(const Named<E> (&table)[N], std::string_view name) {
  for (const auto& n : table)
    if (n.name == name) return n.value;
  return std::nullopt;
}

}  // namespace statepact::detail
