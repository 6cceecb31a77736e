// The prepared statements, one per operation; each calls one server-side function
// (schema_v<n>.sql), so each operation is one round trip.
#pragma once

namespace statepact::detail::pg::stmt {

struct Statement {
  const char* name;
  const char* sql;
};

inline constexpr Statement acquire{"sp_acquire", "SELECT * FROM statepact_acquire($1, $2, $3)"};
inline constexpr Statement renew{"sp_renew", "SELECT * FROM statepact_renew($1, $2, $3, $4)"};
inline constexpr Statement release{"sp_release", "SELECT statepact_release($1, $2, $3)"};
inline constexpr Statement current_fence{"sp_current_fence", "SELECT statepact_current_fence($1)"};
inline constexpr Statement register_resource{"sp_register",
                                             "SELECT statepact_register($1, $2::jsonb, $3)"};
inline constexpr Statement set_policy{"sp_set_policy", "SELECT statepact_set_policy($1, $2)"};
inline constexpr Statement policy{"sp_policy", "SELECT statepact_policy($1)"};
inline constexpr Statement read{"sp_read", "SELECT * FROM statepact_read($1, $2)"};
inline constexpr Statement snapshot{"sp_snapshot", "SELECT * FROM statepact_snapshot($1::jsonb)"};
inline constexpr Statement missing{"sp_missing", "SELECT statepact_missing($1::jsonb)"};
inline constexpr Statement lock{"sp_lock", "SELECT * FROM statepact_lock($1, $2, $3, $4, $5)"};
inline constexpr Statement commit{"sp_commit", "SELECT statepact_commit($1::jsonb)"};
// The one-resource commit without an idempotency key (schema version 6).
inline constexpr Statement commit_one{
    "sp_commit_one", "SELECT statepact_commit_one($1, $2::bigint, $3::jsonb, $4::jsonb)"};

inline constexpr Statement live_leases{"sp_live_leases",
                                       "SELECT * FROM statepact_live_leases($1, $2)"};
inline constexpr Statement list_resources{"sp_list_resources",
                                          "SELECT * FROM statepact_list_resources($1)"};
inline constexpr Statement revoke{"sp_revoke", "SELECT * FROM statepact_revoke($1)"};

inline constexpr Statement all[] = {acquire,           renew,       release,        current_fence,
                                    register_resource, set_policy,  policy,         read,
                                    snapshot,          missing,     lock,           commit,
                                    commit_one,        live_leases, list_resources, revoke};

}  // namespace statepact::detail::pg::stmt
