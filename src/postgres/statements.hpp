// The prepared statements, one per operation; each calls one server-side function
// (schema_v<n>.sql), so each operation is one round trip. Acquire and renew first send a plain
// statement that answers only when they succeed, with the function's columns; its plan is cached
// on the connection, where a PL/pgSQL call returning a row set costs about a third more on the
// server. Only when it has no row does the function run, to say why (backend.cpp).
#pragma once

namespace statepact::detail::pg::stmt {

struct Statement {
  const char* name;
  const char* sql;
};

inline constexpr Statement acquire{"sp_acquire", "SELECT * FROM statepact_acquire($1, $2, $3)"};
// statepact_acquire's upsert (schema_v8.sql), answering only when the lease is the caller's:
// free or expired takes the next token, the owner's live lease keeps its own. ON CONFLICT locks
// the row before it weighs the WHERE clause; `n` is read at its first use, there, so the clock is
// read once, after the lock, and that one reading decides "expired" and "keep the token" and dates
// the new expiry (a clock stepping back between two readings gave a new owner the old owner's
// token). A change of owner moves the token on whatever the clock says. A new row needs no
// decision: token 1, its own reading.
inline constexpr Statement acquire_taken{
    "sp_acquire_taken",
    "WITH n AS MATERIALIZED (SELECT clock_timestamp() AS t) "
    "INSERT INTO statepact_leases AS l (resource, owner, token, expires_at, ttl_ms) "
    "VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 millisecond', $3::bigint) "
    "ON CONFLICT (resource) DO UPDATE "
    "SET token = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > (SELECT n.t FROM n) "
    "THEN l.token ELSE l.token + 1 END, "
    "owner = EXCLUDED.owner, "
    "expires_at = (SELECT n.t FROM n) + EXCLUDED.ttl_ms * interval '1 millisecond', "
    "ttl_ms = EXCLUDED.ttl_ms "
    "WHERE l.expires_at <= (SELECT n.t FROM n) OR l.owner = EXCLUDED.owner "
    "RETURNING 'ok'::text, l.owner, l.token, "
    "(extract(epoch FROM l.expires_at) * 1000000)::bigint, l.ttl_ms"};
inline constexpr Statement renew{"sp_renew", "SELECT * FROM statepact_renew($1, $2, $3, $4)"};
// statepact_renew's 'ok' branch (schema_v5.sql) as one UPDATE: only the stored lease itself (same
// owner and token) while live. A row updated meanwhile is weighed again after the lock. "Live" is
// the one decision, from one reading in the WHERE; the SET's reading, after the lock, only dates
// the new expiry (a token never changes here).
inline constexpr Statement renew_renewed{
    "sp_renew_renewed",
    "UPDATE statepact_leases l "
    "SET expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond', "
    "ttl_ms = $4::bigint "
    "WHERE l.resource = $1 AND l.owner = $2 AND l.token = $3::bigint "
    "AND l.expires_at > clock_timestamp() "
    "RETURNING 'ok'::text, l.token, (extract(epoch FROM l.expires_at) * 1000000)::bigint, "
    "l.ttl_ms"};
// statepact_release's body (schema_v1.sql): a LANGUAGE sql function is planned again on every
// call, the statement once per connection. The token stays as the high-water mark.
inline constexpr Statement release{
    "sp_release",
    "WITH released AS (UPDATE statepact_leases l SET expires_at = 'epoch'::timestamptz "
    "WHERE l.resource = $1 AND l.owner = $2 AND l.token = $3::bigint "
    "AND l.expires_at <> 'epoch'::timestamptz RETURNING 1) "
    "SELECT EXISTS (SELECT 1 FROM released)"};
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

// One write and no checks, the commonest commit, tried before statepact_commit_one: the same
// locks in the same order, then the version bump and the write, in one statement that answers
// only when it wrote, as statepact_commit_one does. No row (no resource, a fence refused or
// required): statepact_commit_one runs and says why. $1 resource, $2 fence token (0: none), $3
// key, $4 value as JSON (NULL: an erase). Read-modify-writes go to the function: a check in the
// same statement would read keys as they were before its lock wait.
#define STATEPACT_PG_WRITE_ONE_KEY(target)                                                         \
  "WITH target AS (" target                                                                        \
  "), "                                                                                            \
  "bumped AS (UPDATE statepact_resources r SET version = r.version + 1 FROM target t "             \
  "WHERE r.name = t.name RETURNING r.name, r.version), "                                           \
  "written AS (INSERT INTO statepact_keys AS k (resource, key, value, version) "                   \
  "SELECT b.name, $3, $4::jsonb, b.version FROM bumped b "                                         \
  "ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version) " \
  "SELECT jsonb_build_object('versions', jsonb_build_object(b.name, b.version), "                  \
  "'replayed', false) FROM bumped b"
// The fence must be the lease's token, the high-water mark; the share lock orders the commit with
// a concurrent acquisition, which is weighed again after it.
inline constexpr Statement commit_fenced_write{
    "sp_commit_fenced_write",
    STATEPACT_PG_WRITE_ONE_KEY(
        "SELECT r.name FROM statepact_resources r JOIN statepact_leases l ON l.resource = r.name "
        "WHERE r.name = $1 AND l.token = $2::bigint FOR NO KEY UPDATE OF r FOR SHARE OF l")};
inline constexpr Statement commit_write{
    "sp_commit_write",
    STATEPACT_PG_WRITE_ONE_KEY("SELECT r.name FROM statepact_resources r WHERE r.name = $1 "
                               "AND $2::bigint = 0 AND NOT r.fence_required FOR NO KEY UPDATE")};
#undef STATEPACT_PG_WRITE_ONE_KEY

inline constexpr Statement live_leases{"sp_live_leases",
                                       "SELECT * FROM statepact_live_leases($1, $2)"};
inline constexpr Statement list_resources{"sp_list_resources",
                                          "SELECT * FROM statepact_list_resources($1)"};
inline constexpr Statement revoke{"sp_revoke", "SELECT * FROM statepact_revoke($1)"};

inline constexpr Statement all[] = {acquire,
                                    acquire_taken,
                                    renew,
                                    renew_renewed,
                                    release,
                                    current_fence,
                                    register_resource,
                                    set_policy,
                                    policy,
                                    read,
                                    snapshot,
                                    missing,
                                    lock,
                                    commit,
                                    commit_one,
                                    commit_fenced_write,
                                    commit_write,
                                    live_leases,
                                    list_resources,
                                    revoke};

}  // namespace statepact::detail::pg::stmt
