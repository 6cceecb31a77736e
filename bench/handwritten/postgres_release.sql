-- An acquire followed by its release, by hand, as a pgbench script (a release needs a lease to
-- release, so the pair is one operation): the acquire of postgres_acquire.sql, then one statement
-- that ends the lease only while the caller still holds it with that token, keeping the row and its
-- token so the next holder gets a newer one.
INSERT INTO handwritten_leases (resource, owner, token, expires_at)
VALUES (:prefix::text || '-' || (:client_id + 1), 'bench', 1, now() + interval '30 seconds')
ON CONFLICT (resource) DO UPDATE
  SET token = CASE WHEN handwritten_leases.owner = EXCLUDED.owner
                        AND handwritten_leases.expires_at > now() THEN handwritten_leases.token
                   ELSE handwritten_leases.token + 1 END,
      owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
  WHERE handwritten_leases.expires_at <= now() OR handwritten_leases.owner = EXCLUDED.owner
RETURNING token \gset
UPDATE handwritten_leases SET expires_at = '-infinity'
WHERE resource = :prefix::text || '-' || (:client_id + 1) AND owner = 'bench' AND token = :token;
