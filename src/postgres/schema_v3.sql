-- statepact schema, version 3: what an operator's tool needs (statepactctl): listing live leases
-- and resources with the server's time, and revoking a lease. Runs after version 2, in the same
-- transaction under the migration advisory lock. Written so that running it twice changes nothing.

-- Live leases, each with the server's time of the read; only names starting with p_prefix (the
-- client matches the rest of a glob). p_resource, when given, names the one lease wanted.
CREATE OR REPLACE FUNCTION statepact_live_leases(p_prefix text, p_resource text)
RETURNS TABLE (o_resource text, o_owner text, o_token bigint, o_expires_us bigint,
               o_ttl_ms bigint, o_now_us bigint)
LANGUAGE sql STABLE AS $$
  SELECT l.resource, l.owner, l.token, statepact_us(l.expires_at), l.ttl_ms, statepact_us(n.t)
    FROM (SELECT clock_timestamp() AS t) n
    JOIN statepact_leases l ON l.expires_at > n.t
   WHERE starts_with(l.resource, p_prefix)
     AND (p_resource IS NULL OR l.resource = p_resource)
   ORDER BY l.resource COLLATE "C"
$$;

CREATE OR REPLACE FUNCTION statepact_list_resources(p_prefix text)
RETURNS TABLE (o_name text, o_version bigint, o_fence_required boolean)
LANGUAGE sql STABLE AS $$
  SELECT r.name, r.version, r.fence_required FROM statepact_resources r
   WHERE starts_with(r.name, p_prefix)
   ORDER BY r.name COLLATE "C"
$$;

-- revoke: the current lease (live, or expired and not taken over: its holder can still write until
-- the fence moves) is ended and the token, which is the high-water mark, moves one past it, so
-- the holder's commits are fenced off at once and its renewals fail. The locks are acquire's, so
-- a revoke and an acquire or commit of the resource are ordered. 'none': nothing to revoke.
CREATE OR REPLACE FUNCTION statepact_revoke(p_resource text)
RETURNS TABLE (o_status text, o_owner text, o_token bigint, o_expires_us bigint, o_ttl_ms bigint,
               o_fence bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cur statepact_leases%ROWTYPE;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(p_resource));
  SELECT * INTO cur FROM statepact_leases l WHERE l.resource = p_resource FOR UPDATE;
  IF cur.resource IS NULL OR cur.expires_at = 'epoch'::timestamptz THEN
    o_status := 'none';
  ELSE
    UPDATE statepact_leases l SET token = cur.token + 1, expires_at = 'epoch'::timestamptz
     WHERE l.resource = p_resource;
    o_status := 'revoked';
    o_owner := cur.owner;
    o_token := cur.token;
    o_expires_us := statepact_us(cur.expires_at);
    o_ttl_ms := cur.ttl_ms;
    o_fence := cur.token + 1;
  END IF;
  RETURN NEXT;
END $$;
