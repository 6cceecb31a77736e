// Values as JSON text that jsonb keeps. jsonb holds every number as a numeric, which would change
// two kinds of doubles: -0.0 becomes 0.0 (a numeric has no negative zero), and an integral double
// that nlohmann writes with an exponent (from 1e15 up: "1e+16") becomes an integer, read back as
// one. Such doubles are written so that the numeric reads back as the same double: an integral
// one in fixed notation with ".0" (a numeric keeps its scale), -0.0 as -1e-400, a negative number
// too small for any double, whose nearest double is -0.0. Pure, so unit tests need no server.
#pragma once

#include <charconv>
#include <cmath>
#include <string>

#include <statepact/types.hpp>

namespace statepact::detail::pg {

// A double that jsonb would give back changed if written as nlohmann writes it.
inline bool jsonb_changes(double x) {
  if (x == 0) return std::signbit(x);
  return std::isfinite(x) && std::abs(x) >= 1e15 && std::trunc(x) == x;
}

inline bool holds_double_jsonb_changes(const Value& v) {
  if (v.is_structured()) {
    for (const auto& item : v)
      if (holds_double_jsonb_changes(item)) return true;
    return false;
  }
  return v.is_number_float() && jsonb_changes(v.get<double>());
}

inline void append_jsonb_text(std::string& out, const Value& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) out += ',';
      first = false;
      out += Value(key).dump();
      out += ':';
      append_jsonb_text(out, item);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& item : v) {
      if (!first) out += ',';
      first = false;
      append_jsonb_text(out, item);
    }
    out += ']';
  } else if (v.is_number_float() && jsonb_changes(v.get<double>())) {
    const double x = v.get<double>();
    if (x == 0) {
      out += "-1e-400";
    } else {
      char buf[400];  // the largest double has 309 digits
      const auto written = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed);
      out.append(buf, written.ptr);
      out += ".0";
    }
  } else {
    out += v.dump();
  }
}

// `v` as JSON text for a jsonb parameter: Value::dump() unless a double needs the forms above.
inline std::string jsonb_text(const Value& v) {
  if (!holds_double_jsonb_changes(v)) return v.dump();
  std::string out;
  append_jsonb_text(out, v);
  return out;
}

}  // namespace statepact::detail::pg
