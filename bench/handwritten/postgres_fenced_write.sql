-- A one-key fenced write by hand, as a pgbench script: one statement that locks the resource's
-- lease row (FOR SHARE, so a takeover waits for it), writes only if the caller's token is still
-- the newest, and bumps the value's version. Client n writes resource <prefix>-n with token 1.
\set token 1
WITH fence AS (
  SELECT token FROM handwritten_leases
  WHERE resource = :prefix::text || '-' || (:client_id + 1) FOR SHARE
)
INSERT INTO handwritten_state (resource, key, value, version)
SELECT :prefix::text || '-' || (:client_id + 1), 'k', '1'::jsonb, 1 FROM fence WHERE fence.token = :token
ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value,
  version = handwritten_state.version + 1;
