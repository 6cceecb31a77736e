-- statepact schema, version 6: a fast path for the common commit, one resource without an
-- idempotency key. statepact_commit (version 2) decomposes a JSON request over many statements;
-- this function takes the resource and fence token as plain parameters, locks the resource row
-- and the lease row in one statement, and writes in one more. Same rules, same answers, same
-- order of refusals as statepact_commit for such a request. Runs after version 5, in the same
-- transaction under the migration advisory lock. Written so that running it twice changes nothing.
--
-- p_token: the fence token, 0 for none (0 is never issued). p_checks: [[key, expected version],
-- ...] in the client's order. p_writes: [[key, value], ...], [key] for an erase; the last write of
-- a key wins.
CREATE OR REPLACE FUNCTION statepact_commit_one(p_resource text, p_token bigint, p_checks jsonb,
                                                p_writes jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  required boolean;
  hw bigint;
  bad record;
  v bigint;
BEGIN
  IF p_token <> 0 THEN
    -- The resource row and the lease row in one statement; the share lock orders this commit
    -- with a concurrent acquisition of the lease.
    SELECT l.token INTO hw
      FROM statepact_resources r JOIN statepact_leases l ON l.resource = r.name
     WHERE r.name = p_resource
       FOR NO KEY UPDATE OF r FOR SHARE OF l;
    IF NOT FOUND THEN
      -- No lease row (never leased: high-water 0), or no resource.
      PERFORM 1 FROM statepact_resources r WHERE r.name = p_resource FOR NO KEY UPDATE;
      IF NOT FOUND THEN
        RETURN jsonb_build_object('error', 'resource_not_found', 'resource', p_resource);
      END IF;
      hw := 0;
    END IF;
    IF p_token <> hw OR hw = 0 THEN
      RETURN jsonb_build_object('error', 'fence', 'resource', p_resource, 'token', p_token,
                                'high_water', hw);
    END IF;
  ELSE
    SELECT r.fence_required INTO required FROM statepact_resources r
     WHERE r.name = p_resource FOR NO KEY UPDATE;
    IF NOT FOUND THEN
      RETURN jsonb_build_object('error', 'resource_not_found', 'resource', p_resource);
    END IF;
    IF required AND jsonb_array_length(p_writes) > 0 THEN
      RETURN jsonb_build_object('error', 'fence_required', 'resource', p_resource);
    END IF;
  END IF;
  IF jsonb_array_length(p_checks) > 0 THEN
    SELECT t.c->>0 AS key, (t.c->>1)::bigint AS expected, coalesce(k.version, 0) AS found
      INTO bad
      FROM jsonb_array_elements(p_checks) WITH ORDINALITY AS t(c, ord)
      LEFT JOIN statepact_keys k ON k.resource = p_resource AND k.key = t.c->>0
     WHERE coalesce(k.version, 0) <> (t.c->>1)::bigint
     ORDER BY t.ord LIMIT 1;
    IF FOUND THEN
      RETURN jsonb_build_object('error', 'conflict', 'resource', p_resource, 'key', bad.key,
                                'expected', bad.expected, 'found', bad.found);
    END IF;
  END IF;
  IF jsonb_array_length(p_writes) = 0 THEN
    RETURN jsonb_build_object('versions', '{}'::jsonb, 'replayed', false);
  END IF;
  WITH bumped AS (
    UPDATE statepact_resources r SET version = r.version + 1
     WHERE r.name = p_resource RETURNING r.version),
  written AS (
    INSERT INTO statepact_keys AS k (resource, key, value, version)
    SELECT DISTINCT ON (t.w->>0) p_resource, t.w->>0, t.w->1, b.version
      FROM bumped b, jsonb_array_elements(p_writes) WITH ORDINALITY AS t(w, ord)
     ORDER BY t.w->>0, t.ord DESC
    ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version)
  SELECT b.version INTO v FROM bumped b;
  RETURN jsonb_build_object('versions', jsonb_build_object(p_resource, v), 'replayed', false);
END $$;

-- acquire as one upsert instead of an advisory lock, a locking read and a write: free or expired
-- (released is expired) -> next token; live and same owner -> extend, same token; live and
-- another owner -> 'busy' with the holder. ON CONFLICT locks the existing row before it weighs
-- the WHERE clause, so the clock is read after the lock, two acquisitions of one resource are
-- ordered (a missing row included: the second insert waits for the first), and a refused one
-- still holds the row while it reads the holder back. revoke takes the same row lock. Same
-- signature and columns as version 1's.
CREATE OR REPLACE FUNCTION statepact_acquire(p_resource text, p_owner text, p_ttl_ms bigint)
RETURNS TABLE (o_status text, o_owner text, o_token bigint, o_expires_us bigint, o_ttl_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cur statepact_leases%ROWTYPE;
  ttl interval := p_ttl_ms * interval '1 millisecond';
BEGIN
  INSERT INTO statepact_leases AS l (resource, owner, token, expires_at, ttl_ms)
  VALUES (p_resource, p_owner, 1, clock_timestamp() + ttl, p_ttl_ms)
  ON CONFLICT (resource) DO UPDATE
     SET token = CASE WHEN l.expires_at > clock_timestamp() THEN l.token ELSE l.token + 1 END,
         owner = EXCLUDED.owner, expires_at = clock_timestamp() + ttl, ttl_ms = EXCLUDED.ttl_ms
   WHERE l.expires_at <= clock_timestamp() OR l.owner = EXCLUDED.owner
  RETURNING l.* INTO cur;
  IF FOUND THEN
    o_status := 'ok';
  ELSE
    SELECT * INTO cur FROM statepact_leases l WHERE l.resource = p_resource;
    o_status := 'busy';
  END IF;
  o_owner := cur.owner;
  o_token := cur.token;
  o_expires_us := statepact_us(cur.expires_at);
  o_ttl_ms := cur.ttl_ms;
  RETURN NEXT;
END $$;
