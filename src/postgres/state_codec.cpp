#include "state_codec.hpp"

namespace statepact::detail::pg {

bool decode_register(const Rows& rows) {
  constexpr const char* what = "statepact_register";
  return bool_at(only_row(rows, what), 0, what);
}

Found<std::monostate> decode_set_policy(const Rows& rows, const std::string& name) {
  constexpr const char* what = "statepact_set_policy";
  if (!bool_at(only_row(rows, what), 0, what)) return Found<std::monostate>::not_registered(name);
  return Found<std::monostate>::of({});
}

Found<ResourcePolicy> decode_policy(const Rows& rows, const std::string& name) {
  constexpr const char* what = "statepact_policy";
  const Row& row = only_row(rows, what);
  if (is_null(row, 0, what)) return Found<ResourcePolicy>::not_registered(name);
  return Found<ResourcePolicy>::of(ResourcePolicy{bool_at(row, 0, what)});
}

Found<Entry> decode_read(const Rows& rows, const std::string& resource) {
  constexpr const char* what = "statepact_read";
  const Row& row = only_row(rows, what);
  if (!bool_at(row, 0, what)) return Found<Entry>::not_registered(resource);
  return Found<Entry>::of(Entry{json_at(row, 1, what), count_at(row, 2, what)});
}

Found<std::vector<ResourceSnapshot>> decode_snapshot(const Rows& rows,
                                                     const std::vector<std::string>& resources) {
  constexpr const char* what = "statepact_snapshot";
  std::vector<ResourceSnapshot> out;
  bool fresh = true;  // rows of one resource come together, in the order asked
  std::string last;
  for (const auto& row : rows) {
    const std::string& name = text_at(row, 0, what);
    if (std::find(resources.begin(), resources.end(), name) == resources.end()) unexpected(what);
    if (!bool_at(row, 1, what)) return Found<std::vector<ResourceSnapshot>>::not_registered(name);
    if (fresh || name != last) {
      out.push_back(ResourceSnapshot{name, count_at(row, 2, what), {}});
      last = name;
      fresh = false;
    }
    if (!is_null(row, 3, what))
      out.back().entries[text_at(row, 3, what)] =
          Entry{json_at(row, 4, what), count_at(row, 5, what)};
  }
  return Found<std::vector<ResourceSnapshot>>::of(std::move(out));
}

Found<std::monostate> decode_missing(const Rows& rows) {
  constexpr const char* what = "statepact_missing";
  const Row& row = only_row(rows, what);
  if (is_null(row, 0, what)) return Found<std::monostate>::of({});
  return Found<std::monostate>::not_registered(text_at(row, 0, what));
}

std::vector<ResourceInfo> decode_list_resources(const Rows& rows,
                                                const std::optional<std::string>& glob) {
  constexpr const char* what = "statepact_list_resources";
  std::vector<ResourceInfo> out;
  for (const auto& row : rows) {
    ResourceInfo info{text_at(row, 0, what), count_at(row, 1, what),
                      ResourcePolicy{bool_at(row, 2, what)}};
    if (glob_accepts(glob, info.name)) out.push_back(std::move(info));
  }
  return out;
}

LockAnswer decode_lock(const Rows& rows) {
  constexpr const char* what = "statepact_lock";
  const Row& row = only_row(rows, what);
  LockAnswer out;
  const auto v = named<Verdict>(text_at(row, 0, what));
  if (!v || *v == Verdict::busy || *v == Verdict::lost || *v == Verdict::revoked ||
      *v == Verdict::none || *v == Verdict::wait)
    unexpected(what);
  out.verdict = *v;
  if (out.verdict == Verdict::ok) out.entry = Entry{json_at(row, 1, what), count_at(row, 2, what)};
  return out;
}

}  // namespace statepact::detail::pg
