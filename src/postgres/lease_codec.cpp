#include "lease_codec.hpp"

namespace statepact::detail::pg {

namespace {

Verdict status_at(const Row& row, const char* what, std::initializer_list<Verdict> allowed) {
  const auto v = named<Verdict>(text_at(row, 0, what));
  if (!v || std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) unexpected(what);
  return *v;
}

}  // namespace

AcquireAnswer decode_acquire(const Rows& rows, const std::string& resource) {
  constexpr const char* what = "statepact_acquire";
  const Row& row = only_row(rows, what);
  AcquireAnswer out;
  out.verdict = status_at(row, what, {Verdict::ok, Verdict::busy});
  out.lease = Lease{resource, text_at(row, 1, what), count_at(row, 2, what),
                    from_us(int_at(row, 3, what)), milliseconds(int_at(row, 4, what))};
  return out;
}

RenewAnswer decode_renew(const Rows& rows, const Lease& lease) {
  constexpr const char* what = "statepact_renew";
  const Row& row = only_row(rows, what);
  RenewAnswer out;
  const std::string& status = text_at(row, 0, what);
  // A refusal answers with the loss itself, so the function's status is 'ok' or a LeaseLoss.
  if (status != name_of(Verdict::ok)) {
    const auto loss = named<LeaseLoss>(status);
    if (!loss) unexpected(what);
    out.verdict = Verdict::lost;
    out.loss = *loss;
    out.high_water = count_at(row, 1, what);
    return out;
  }
  out.lease = lease;
  out.lease.expires_at = from_us(int_at(row, 2, what));
  out.lease.ttl = milliseconds(int_at(row, 3, what));
  if (count_at(row, 1, what) != lease.token) unexpected(what);
  return out;
}

bool decode_release(const Rows& rows) {
  constexpr const char* what = "statepact_release";
  return bool_at(only_row(rows, what), 0, what);
}

Token decode_fence(const Rows& rows) {
  constexpr const char* what = "statepact_current_fence";
  return count_at(only_row(rows, what), 0, what);
}

std::optional<RevokedLease> decode_revoke(const Rows& rows, const std::string& resource) {
  constexpr const char* what = "statepact_revoke";
  const Row& row = only_row(rows, what);
  if (status_at(row, what, {Verdict::revoked, Verdict::none}) == Verdict::none) return std::nullopt;
  RevokedLease out{Lease{resource, text_at(row, 1, what), count_at(row, 2, what),
                         from_us(int_at(row, 3, what)), milliseconds(int_at(row, 4, what))},
                   count_at(row, 5, what)};
  if (out.fence <= out.lease.token) unexpected(what);
  return out;
}

std::vector<LeaseInfo> decode_live_leases(const Rows& rows,
                                          const std::optional<std::string>& glob) {
  constexpr const char* what = "statepact_live_leases";
  std::vector<LeaseInfo> out;
  for (const auto& row : rows) {
    LeaseInfo info;
    info.resource = text_at(row, 0, what);
    if (!glob_accepts(glob, info.resource)) continue;
    info.owner = text_at(row, 1, what);
    info.token = count_at(row, 2, what);
    const long long expires_us = int_at(row, 3, what);
    info.expires_at = from_us(expires_us);
    info.ttl = milliseconds(int_at(row, 4, what));
    info.expires_in = std::chrono::duration_cast<milliseconds>(
        std::chrono::microseconds(expires_us - int_at(row, 5, what)));
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace statepact::detail::pg
