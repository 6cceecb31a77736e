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

// Where an enumeration's table is: `template <> struct WireNames<E> { static constexpr const
// auto& table = ...; };` beside the table gives it name_of() and named<E>().
template <class E>
struct WireNames;

template <class E>
constexpr std::string_view name_of(E value) {
  return name_in(WireNames<E>::table, value);
}

// The value a script or function named; empty for a word this client does not know.
template <class E>
constexpr std::optional<E> named(std::string_view name) {
  return value_named(WireNames<E>::table, name);
}

}  // namespace statepact::detail
