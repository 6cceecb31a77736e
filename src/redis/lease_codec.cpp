#include "lease_codec.hpp"

#include "reply_reader.hpp"

namespace statepact::detail {

using namespace reply_reader;

ScriptCall encode_acquire(const KeyLayout& layout, const std::string& resource,
                          const std::string& owner, milliseconds ttl) {
  return ScriptCall{{layout.lease(resource), layout.fence(resource)},
                    {owner, std::to_string(ttl.count())}};
}

AcquireAnswer decode_acquire(const RedisReply& r, const std::string& resource,
                             const std::string& owner, milliseconds ttl) {
  constexpr const char* what = "acquire";
  AcquireAnswer out;
  out.verdict = verdict_at(r, 0, what, {Verdict::ok, Verdict::busy});
  out.lease.resource = resource;
  if (out.verdict == Verdict::busy) {
    // The holder's lease: the script does not send its ttl, which LeaseNotAvailableError omits.
    out.lease.owner = str_at(r, 1, what);
    out.lease.token = num_at(r, 2, what);
    out.lease.expires_at = from_ms(num_at(r, 3, what));
    return out;
  }
  out.lease.owner = owner;
  out.lease.token = num_at(r, 1, what);
  out.lease.expires_at = from_ms(num_at(r, 2, what));
  out.lease.ttl = ttl;
  return out;
}

ScriptCall encode_renew(const KeyLayout& layout, const Lease& lease, milliseconds ttl) {
  return ScriptCall{{layout.lease(lease.resource), layout.fence(lease.resource)},
                    {lease.owner, std::to_string(lease.token), std::to_string(ttl.count())}};
}

RenewAnswer decode_renew(const RedisReply& r, const Lease& lease, milliseconds ttl) {
  constexpr const char* what = "renew";
  RenewAnswer out;
  out.verdict = verdict_at(r, 0, what, {Verdict::ok, Verdict::lost});
  if (out.verdict == Verdict::lost) {
    const auto loss = named<LeaseLoss>(str_at(r, 1, what));
    if (!loss) malformed(what);
    out.loss = *loss;
    out.high_water = num_at(r, 2, what);
    return out;
  }
  out.lease = lease;
  out.lease.token = num_at(r, 1, what);
  out.lease.expires_at = from_ms(num_at(r, 2, what));
  out.lease.ttl = ttl;
  // The script renews only the lease it was given: any other token is a broken script.
  if (out.lease.token != lease.token) malformed(what);
  return out;
}

ScriptCall encode_release(const KeyLayout& layout, const Lease& lease) {
  return ScriptCall{{layout.lease(lease.resource)}, {lease.owner, std::to_string(lease.token)}};
}

bool decode_release(const RedisReply& r) {
  return flag_reply(r, "release");
}

ScriptCall encode_fence(const KeyLayout& layout, const std::string& resource) {
  return ScriptCall{{layout.fence(resource), layout.lease(resource)}, {}};
}

Token decode_fence(const RedisReply& r) {
  if (r.type != RedisReply::Type::string) malformed("current_fence");
  return parse_u64(r.str, "current_fence");
}

ScriptCall encode_revoke(const KeyLayout& layout, const std::string& resource) {
  return ScriptCall{{layout.lease(resource), layout.fence(resource)}, {}};
}

std::optional<RevokedLease> decode_revoke(const RedisReply& r, const std::string& resource) {
  constexpr const char* what = "revoke";
  if (verdict_at(r, 0, what, {Verdict::revoked, Verdict::none}) == Verdict::none)
    return std::nullopt;
  RevokedLease out;
  out.lease.resource = resource;
  out.lease.owner = str_at(r, 1, what);
  out.lease.token = num_at(r, 2, what);
  out.lease.expires_at = from_ms(num_at(r, 3, what));
  out.lease.ttl = milliseconds(num_at(r, 4, what));
  out.fence = num_at(r, 5, what);
  if (out.fence <= out.lease.token) malformed(what);
  return out;
}

std::optional<LeaseInfo> decode_live_lease(const RedisReply& fields, const std::string& resource,
                                           std::uint64_t now_ms) {
  constexpr const char* what = "lease_info";
  if (fields.type != RedisReply::Type::array || fields.elements.size() != 4) malformed(what);
  if (fields.elements[0].is_nil() || fields.elements[2].is_nil()) return std::nullopt;
  const std::uint64_t exp = num_at(fields, 2, what);
  if (exp <= now_ms) return std::nullopt;
  LeaseInfo info;
  info.resource = resource;
  info.owner = str_at(fields, 0, what);
  info.token = num_at(fields, 1, what);
  info.expires_at = from_ms(exp);
  info.ttl = milliseconds(fields.elements[3].is_nil() ? 0 : num_at(fields, 3, what));
  info.expires_in = milliseconds(exp - now_ms);
  return info;
}

}  // namespace statepact::detail
