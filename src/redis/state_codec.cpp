#include "state_codec.hpp"

#include <fmt/format.h>

#include "reply_reader.hpp"

namespace statepact::detail {

using namespace reply_reader;

Entry decode_entry(const RedisReply& v) {
  constexpr const char* what = "a state entry";
  if (v.is_nil()) return Entry{};
  if (v.type != RedisReply::Type::string) malformed(what);
  const auto space = v.str.find(' ');
  Entry e;
  e.version = parse_u64(std::string_view(v.str).substr(0, space), what);
  if (space != std::string::npos) e.value = parse_json(v.str.substr(space + 1), what);
  return e;
}

namespace {

const char* policy_flag(ResourcePolicy p) {
  return p.fence_required ? "1" : "0";
}

// A stored policy flag; absent: a resource registered before policies were stored, which has
// the default policy.
ResourcePolicy policy_from(const RedisReply& flag, const char* what) {
  if (flag.is_nil()) return ResourcePolicy{};
  if (flag.type != RedisReply::Type::string || (flag.str != "1" && flag.str != "0"))
    malformed(what);
  return ResourcePolicy{flag.str == "1"};
}

// Per resource, its version key and one other (`second`): the layout of the scripts that read
// many resources.
ScriptCall version_and(const KeyLayout& layout,
                       std::string (KeyLayout::*second)(const std::string&) const,
                       const std::vector<std::string>& resources) {
  ScriptCall call;
  call.keys.reserve(2 * resources.size());
  for (const auto& r : resources) {
    call.keys.push_back(layout.version(r));
    call.keys.push_back((layout.*second)(r));
  }
  return call;
}

}  // namespace

ScriptCall encode_register(const KeyLayout& layout, const std::string& name, const Value& state,
                           ResourcePolicy policy) {
  ScriptCall call{{layout.version(name), layout.state(name), layout.policy(name)}, {}};
  call.args.reserve(1 + 2 * state.size());
  call.args.push_back(policy_flag(policy));
  for (const auto& [key, value] : state.items()) {
    call.args.push_back(key);
    call.args.push_back("0 " + value.dump());
  }
  return call;
}

bool decode_register(const RedisReply& r, const std::string& name) {
  if (r.type == RedisReply::Type::integer && r.integer == -1)
    throw ConfigurationError(fmt::format(
        "redis: resource '{}' is registered in the key form of versions before Redis Cluster "
        "support only; registering it again would fork its state. Fix: stop every client of the "
        "earlier version, then run RedisBackend::upgrade_key_layout() (statepactctl migrate). "
        "Nothing was changed",
        name));
  return flag_reply(r, "register_resource");
}

ScriptCall encode_set_policy(const KeyLayout& layout, const std::string& name,
                             ResourcePolicy policy) {
  return ScriptCall{{layout.version(name), layout.policy(name)}, {policy_flag(policy)}};
}

Found<std::monostate> decode_set_policy(const RedisReply& r, const std::string& name) {
  if (!flag_reply(r, "set_resource_policy")) return Found<std::monostate>::not_registered(name);
  return Found<std::monostate>::of({});
}

ScriptCall encode_policy(const KeyLayout& layout, const std::string& name) {
  return ScriptCall{{layout.version(name), layout.policy(name)}, {}};
}

Found<ResourcePolicy> decode_policy(const RedisReply& r, const std::string& name) {
  constexpr const char* what = "resource_policy";
  if (verdict_at(r, 0, what, {Verdict::ok, Verdict::resource_not_found}) != Verdict::ok)
    return Found<ResourcePolicy>::not_registered(name);
  return Found<ResourcePolicy>::of(policy_from(at(r, 1, what), what));
}

ScriptCall encode_read(const KeyLayout& layout, const std::string& resource,
                       const std::string& key) {
  return ScriptCall{{layout.version(resource), layout.state(resource)}, {key}};
}

Found<Entry> decode_read(const RedisReply& r, const std::string& resource) {
  constexpr const char* what = "read";
  if (verdict_at(r, 0, what, {Verdict::ok, Verdict::resource_not_found}) != Verdict::ok)
    return Found<Entry>::not_registered(resource);
  return Found<Entry>::of(decode_entry(at(r, 1, what)));
}

ScriptCall encode_snapshot(const KeyLayout& layout, const std::vector<std::string>& resources) {
  return version_and(layout, &KeyLayout::state, resources);
}

Found<std::vector<ResourceSnapshot>> decode_snapshot(const RedisReply& r,
                                                     const std::vector<std::string>& resources) {
  constexpr const char* what = "snapshot";
  if (verdict_at(r, 0, what, {Verdict::ok, Verdict::resource_not_found}) != Verdict::ok)
    return Found<std::vector<ResourceSnapshot>>::not_registered(
        nth(resources, num_at(r, 1, what), what));
  if (r.elements.size() != 1 + 2 * resources.size()) malformed(what);
  std::vector<ResourceSnapshot> out;
  out.reserve(resources.size());
  for (std::size_t i = 0; i < resources.size(); ++i) {
    ResourceSnapshot snap;
    snap.resource = resources[i];
    snap.version = num_at(r, 1 + 2 * i, what);
    const auto& flat = at(r, 2 + 2 * i, what);
    if (flat.type != RedisReply::Type::array || flat.elements.size() % 2 != 0) malformed(what);
    for (std::size_t k = 0; k < flat.elements.size(); k += 2)
      snap.entries[str_at(flat, k, what)] = decode_entry(flat.elements[k + 1]);
    out.push_back(std::move(snap));
  }
  return Found<std::vector<ResourceSnapshot>>::of(std::move(out));
}

ScriptCall encode_exists(const KeyLayout& layout, const std::vector<std::string>& resources) {
  ScriptCall call;
  call.keys.reserve(resources.size());
  for (const auto& r : resources) call.keys.push_back(layout.version(r));
  return call;
}

Found<std::monostate> decode_exists(const RedisReply& r,
                                    const std::vector<std::string>& resources) {
  constexpr const char* what = "begin_session";
  if (r.type != RedisReply::Type::integer || r.integer < 0) malformed(what);
  if (r.integer == 0) return Found<std::monostate>::of({});
  return Found<std::monostate>::not_registered(
      nth(resources, static_cast<std::uint64_t>(r.integer), what));
}

ScriptCall encode_resource_info(const KeyLayout& layout, const std::vector<std::string>& names) {
  return version_and(layout, &KeyLayout::policy, names);
}

std::vector<std::optional<ResourceInfo>> decode_resource_info(
    const RedisReply& r, const std::vector<std::string>& names) {
  constexpr const char* what = "list_resources";
  if (r.type != RedisReply::Type::array || r.elements.size() != names.size()) malformed(what);
  std::vector<std::optional<ResourceInfo>> out;
  out.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& row = r.elements[i];
    if (at(row, 0, what).is_nil()) {  // deleted since the scan
      out.emplace_back();
      continue;
    }
    ResourceInfo info;
    info.name = names[i];
    info.version = num_at(row, 0, what);
    info.policy = policy_from(at(row, 1, what), what);
    out.emplace_back(std::move(info));
  }
  return out;
}

ScriptCall encode_lock(const KeyLayout& layout, const std::string& owner,
                       const std::string& resource, const std::string& key, LockMode mode,
                       milliseconds record_ttl, milliseconds queue_ttl) {
  return ScriptCall{{layout.lock(resource, key), layout.version(resource), layout.state(resource),
                     layout.lock_queue(resource, key)},
                    {owner, mode == LockMode::shared ? "S" : "X",
                     std::to_string(record_ttl.count()), key, std::to_string(queue_ttl.count())}};
}

LockAnswer decode_lock(const RedisReply& r) {
  constexpr const char* what = "lock";
  LockAnswer out;
  out.verdict = verdict_at(r, 0, what, {Verdict::ok, Verdict::wait, Verdict::resource_not_found});
  if (out.verdict == Verdict::ok) {
    out.entry = decode_entry(at(r, 1, what));
  } else if (out.verdict == Verdict::wait) {
    // Someone holds it, so the script names at least one holder.
    if (r.elements.size() < 2) malformed(what);
    for (std::size_t i = 1; i < r.elements.size(); ++i) out.holders.push_back(str_at(r, i, what));
  }
  return out;
}

ScriptCall encode_wait(const KeyLayout& layout, const std::string& owner,
                       const std::vector<std::string>& holders, milliseconds record_ttl) {
  ScriptCall call{{layout.waits()}, {owner, std::to_string(record_ttl.count())}};
  call.args.insert(call.args.end(), holders.begin(), holders.end());
  return call;
}

Verdict decode_wait(const RedisReply& r) {
  if (r.type != RedisReply::Type::string && r.type != RedisReply::Type::status) malformed("wait");
  const auto v = named<Verdict>(r.str);
  if (!v || (*v != Verdict::wait && *v != Verdict::deadlock)) malformed("wait");
  return *v;
}

ScriptCall encode_unlock(std::vector<std::string> lock_keys, const std::string& owner) {
  return ScriptCall{std::move(lock_keys), {owner}};
}

}  // namespace statepact::detail
