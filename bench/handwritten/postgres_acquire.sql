-- A lease acquire by hand, as a pgbench script: one statement that takes the lease if it is free,
-- expired or already the caller's, and returns its token: the caller's live lease keeps its token,
-- anything else gets the next one.
INSERT INTO handwritten_leases (resource, owner, token, expires_at)
VALUES (:prefix::text || '-' || (:client_id + 1), 'bench', 1, now() + interval '30 seconds')
ON CONFLICT (resource) DO UPDATE
  SET token = CASE WHEN handwritten_leases.owner = EXCLUDED.owner
                        AND handwritten_leases.expires_at > now() THEN handwritten_leases.token
                   ELSE handwritten_leases.token + 1 END,
      owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
  WHERE handwritten_leases.expires_at <= now() OR handwritten_leases.owner = EXCLUDED.owner
RETURNING token;
