// The lease functions' answers, read without libpqxx into the shared vocabulary
// (detail/verdicts.hpp), as the Redis lease codec reads the scripts' replies. The parameters are
// each statement's own (statements.hpp), so only the answers need a codec.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <statepact/detail/verdicts.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

#include "row.hpp"

namespace statepact::detail::pg {

// statepact_acquire: (status 'ok'|'busy', owner, token, expires µs, ttl ms); busy: the holder's.
AcquireAnswer decode_acquire(const Rows& rows, const std::string& resource);

// statepact_renew: (status 'ok' or a LeaseLoss name, token or high-water mark, expires µs, ttl ms)
RenewAnswer decode_renew(const Rows& rows, const Lease& lease);

// statepact_release: whether the caller's own lease was released.
bool decode_release(const Rows& rows);

// statepact_current_fence: the high-water mark.
Token decode_fence(const Rows& rows);

// statepact_revoke: (status 'revoked'|'none', owner, token, expires µs, ttl ms, new fence)
std::optional<RevokedLease> decode_revoke(const Rows& rows, const std::string& resource);

// statepact_live_leases: (resource, owner, token, expires µs, ttl ms, server now µs) per lease;
// only those whose names `glob` accepts (the server matched its literal prefix only).
std::vector<LeaseInfo> decode_live_leases(const Rows& rows, const std::optional<std::string>& glob);

}  // namespace statepact::detail::pg
