-- A lease renewal by hand, as a pgbench script: one statement that extends the lease only while the
-- caller still holds it, live, with the same token. Client n renews resource <prefix>-n, token 1.
UPDATE handwritten_leases SET expires_at = now() + interval '30 seconds'
WHERE resource = :prefix::text || '-' || (:client_id + 1) AND owner = 'bench' AND token = 1
  AND expires_at > now()
RETURNING token;
