-- statepact schema, version 1. Runs inside one transaction under the migration advisory lock, with
-- search_path set to the backend's schema.

-- The lease table: the current owner, token and expiry per resource. `token` is also the
-- high-water mark: release sets expires_at to the epoch and keeps the row.
CREATE TABLE statepact_leases (
  resource   text PRIMARY KEY,
  owner      text NOT NULL,
  token      bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  ttl_ms     bigint NOT NULL
);

-- One row per registered resource; version = number of commits that wrote it.
CREATE TABLE statepact_resources (
  name    text PRIMARY KEY,
  version bigint NOT NULL
);

-- One row per key ever written (or locked while absent). value NULL with version > 0 is a
-- tombstone; value NULL with version 0 is a placeholder a pessimistic lock inserted so that an
-- absent key has a row to lock: it reads as "never written".
CREATE TABLE statepact_keys (
  resource text NOT NULL,
  key      text NOT NULL,
  value    jsonb,
  version  bigint NOT NULL,
  PRIMARY KEY (resource, key)
);

CREATE TABLE statepact_idempotency (
  key         text PRIMARY KEY,
  fingerprint text NOT NULL,
  result      jsonb NOT NULL,
  expires_at  timestamptz NOT NULL
);
CREATE INDEX statepact_idempotency_expires ON statepact_idempotency (expires_at);

CREATE FUNCTION statepact_us(ts timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT (extract(epoch FROM ts) * 1000000)::bigint $$;

-- acquire: free, released or expired -> next token; live and same owner -> extend, same token;
-- live and another owner -> 'busy' with the holder. The advisory lock serializes acquisitions of
-- one resource even before its row exists; the row lock orders them with renew and release.
CREATE FUNCTION statepact_acquire(p_resource text, p_owner text, p_ttl_ms bigint)
RETURNS TABLE (o_status text, o_owner text, o_token bigint, o_expires_us bigint, o_ttl_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cur statepact_leases%ROWTYPE;
  now_ts timestamptz;
  ttl interval := p_ttl_ms * interval '1 millisecond';
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(p_resource));
  SELECT * INTO cur FROM statepact_leases l WHERE l.resource = p_resource FOR UPDATE;
  now_ts := clock_timestamp();  -- after the locks: a waiter must not decide on a stale clock
  IF cur.resource IS NULL THEN
    INSERT INTO statepact_leases VALUES (p_resource, p_owner, 1, now_ts + ttl, p_ttl_ms)
    RETURNING * INTO cur;
    o_status := 'ok';
  ELSIF cur.expires_at > now_ts AND cur.owner <> p_owner THEN
    o_status := 'busy';
  ELSIF cur.expires_at > now_ts THEN
    UPDATE statepact_leases l SET expires_at = now_ts + ttl, ttl_ms = p_ttl_ms
     WHERE l.resource = p_resource RETURNING * INTO cur;
    o_status := 'ok';
  ELSE
    UPDATE statepact_leases l
       SET owner = p_owner, token = cur.token + 1, expires_at = now_ts + ttl, ttl_ms = p_ttl_ms
     WHERE l.resource = p_resource RETURNING * INTO cur;
    o_status := 'ok';
  END IF;
  o_owner := cur.owner;
  o_token := cur.token;
  o_expires_us := statepact_us(cur.expires_at);
  o_ttl_ms := cur.ttl_ms;
  RETURN NEXT;
END $$;

-- renew: only the stored lease itself (same owner and token), and only while live. o_token is
-- the high-water mark when the renewal is refused.
CREATE FUNCTION statepact_renew(p_resource text, p_owner text, p_token bigint, p_ttl_ms bigint)
RETURNS TABLE (o_status text, o_token bigint, o_expires_us bigint, o_ttl_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cur statepact_leases%ROWTYPE;
  now_ts timestamptz;
BEGIN
  SELECT * INTO cur FROM statepact_leases l WHERE l.resource = p_resource FOR UPDATE;
  now_ts := clock_timestamp();
  IF cur.resource IS NULL THEN
    o_status := 'none';
    o_token := 0;
  ELSIF cur.expires_at = 'epoch'::timestamptz OR cur.token <> p_token OR cur.owner <> p_owner THEN
    o_status := CASE WHEN p_token < cur.token THEN 'superseded' ELSE 'released' END;
    o_token := cur.token;
  ELSIF cur.expires_at <= now_ts THEN
    o_status := 'expired';
    o_token := cur.token;
  ELSE
    UPDATE statepact_leases l
       SET expires_at = now_ts + p_ttl_ms * interval '1 millisecond', ttl_ms = p_ttl_ms
     WHERE l.resource = p_resource RETURNING * INTO cur;
    o_status := 'ok';
    o_token := cur.token;
    o_expires_us := statepact_us(cur.expires_at);
    o_ttl_ms := cur.ttl_ms;
  END IF;
  RETURN NEXT;
END $$;

-- release: true only for the current owner's own lease; the token stays as the high-water mark.
CREATE FUNCTION statepact_release(p_resource text, p_owner text, p_token bigint) RETURNS boolean
LANGUAGE sql AS $$
  WITH released AS (
    UPDATE statepact_leases l SET expires_at = 'epoch'::timestamptz
     WHERE l.resource = p_resource AND l.owner = p_owner AND l.token = p_token
       AND l.expires_at <> 'epoch'::timestamptz
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM released)
$$;

CREATE FUNCTION statepact_current_fence(p_resource text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT l.token FROM statepact_leases l WHERE l.resource = p_resource), 0)
$$;

CREATE FUNCTION statepact_register(p_name text, p_state jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO statepact_resources (name, version) VALUES (p_name, 0) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO statepact_keys (resource, key, value, version)
  SELECT p_name, e.key, e.value, 0 FROM jsonb_each(p_state) e
  ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value, version = 0;
  RETURN true;
END $$;

CREATE FUNCTION statepact_read(p_resource text, p_key text)
RETURNS TABLE (o_exists boolean, o_value jsonb, o_version bigint)
LANGUAGE sql STABLE AS $$
  SELECT r.name IS NOT NULL, k.value, coalesce(k.version, 0)
    FROM (SELECT 1) AS one
    LEFT JOIN statepact_resources r ON r.name = p_resource
    LEFT JOIN statepact_keys k ON k.resource = r.name AND k.key = p_key
$$;

-- One statement, so one snapshot: a consistent copy of every named resource, tombstones
-- included, placeholders left out. A resource that does not exist comes back with o_exists false.
CREATE FUNCTION statepact_snapshot(p_names jsonb)
RETURNS TABLE (o_resource text, o_exists boolean, o_resource_version bigint, o_key text,
               o_value jsonb, o_version bigint)
LANGUAGE sql STABLE AS $$
  SELECT n.name, r.name IS NOT NULL, r.version, k.key, k.value, k.version
    FROM jsonb_array_elements_text(p_names) WITH ORDINALITY AS n(name, ord)
    LEFT JOIN statepact_resources r ON r.name = n.name
    LEFT JOIN statepact_keys k
      ON k.resource = r.name AND (k.value IS NOT NULL OR k.version > 0)
   ORDER BY n.ord, k.key
$$;

-- The first of the named resources that does not exist, or NULL.
CREATE FUNCTION statepact_missing(p_names jsonb) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT n.name FROM jsonb_array_elements_text(p_names) WITH ORDINALITY AS n(name, ord)
   WHERE NOT EXISTS (SELECT 1 FROM statepact_resources r WHERE r.name = n.name)
   ORDER BY n.ord LIMIT 1
$$;

-- A pessimistic session's lock on one key, inside its transaction. Lock failures are caught (the
-- block is a subtransaction) and reported as a status, so the session's transaction and the
-- locks it already holds survive a timeout or a refused deadlock.
CREATE FUNCTION statepact_lock(p_resource text, p_key text, p_exclusive boolean,
                               p_timeout_ms bigint, p_deadlock_ms bigint)
RETURNS TABLE (o_status text, o_value jsonb, o_version bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v jsonb;
  ver bigint;
  got boolean := false;
BEGIN
  PERFORM set_config('lock_timeout', p_timeout_ms::text, true);
  IF p_deadlock_ms > 0 THEN
    PERFORM set_config('deadlock_timeout', p_deadlock_ms::text, true);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM statepact_resources r WHERE r.name = p_resource) THEN
    o_status := 'not_found';
    RETURN NEXT;
    RETURN;
  END IF;
  BEGIN
    FOR attempt IN 1..2 LOOP
      IF p_exclusive THEN
        SELECT k.value, k.version INTO v, ver FROM statepact_keys k
         WHERE k.resource = p_resource AND k.key = p_key FOR UPDATE;
      ELSE
        SELECT k.value, k.version INTO v, ver FROM statepact_keys k
         WHERE k.resource = p_resource AND k.key = p_key FOR SHARE;
      END IF;
      got := FOUND;
      EXIT WHEN got;
      -- An absent key gets a placeholder row so that it can be locked too.
      INSERT INTO statepact_keys (resource, key, value, version)
      VALUES (p_resource, p_key, NULL, 0) ON CONFLICT DO NOTHING;
    END LOOP;
  EXCEPTION
    WHEN lock_not_available THEN
      o_status := 'timeout';
      RETURN NEXT;
      RETURN;
    WHEN deadlock_detected THEN
      o_status := 'deadlock';
      RETURN NEXT;
      RETURN;
    WHEN query_canceled THEN
      o_status := 'cancelled';
      RETURN NEXT;
      RETURN;
  END;
  o_status := CASE WHEN got THEN 'ok' ELSE 'missing' END;
  o_value := v;
  o_version := coalesce(ver, 0);
  RETURN NEXT;
END $$;

-- The whole commit in one call: idempotent replay, resources, fences, read checks, writes and the
-- idempotency record. Refusals come back as {"error": ...} before anything is written, so the
-- caller's transaction (if any) can simply be rolled back.
CREATE FUNCTION statepact_commit(req jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  idem text := req->>'idempotency_key';
  rec record;
  fc record;
  ck record;
  missing text;
  hw bigint;
  found_v bigint;
  versions jsonb;
  result jsonb;
BEGIN
  IF idem IS NOT NULL THEN
    -- Two commits with one key must not both miss the record and both apply.
    PERFORM pg_advisory_xact_lock(1936745331, hashtext(idem));
    SELECT i.fingerprint, i.result INTO rec FROM statepact_idempotency i
     WHERE i.key = idem AND i.expires_at > clock_timestamp();
    IF FOUND THEN
      IF rec.fingerprint IS DISTINCT FROM req->>'fingerprint' THEN
        RETURN jsonb_build_object('error', 'idempotency_key_reused');
      END IF;
      RETURN rec.result || jsonb_build_object('replayed', true);
    END IF;
  END IF;

  -- Lock every resource involved, in name order so that concurrent commits cannot deadlock;
  -- the checks below then see every commit that finished before ours.
  PERFORM 1 FROM statepact_resources r
   WHERE r.name IN (SELECT jsonb_array_elements_text(req->'resources')
                    UNION SELECT w->>'resource' FROM jsonb_array_elements(req->'writes') w
                    UNION SELECT c->>'resource' FROM jsonb_array_elements(req->'checks') c)
   ORDER BY r.name FOR NO KEY UPDATE;

  SELECT s.name INTO missing FROM (
      SELECT x.name, 1 AS src, x.ord
        FROM jsonb_array_elements_text(req->'resources') WITH ORDINALITY AS x(name, ord)
      UNION ALL
      SELECT y.w->>'resource', 2, y.ord
        FROM jsonb_array_elements(req->'writes') WITH ORDINALITY AS y(w, ord)
      UNION ALL
      SELECT z.c->>'resource', 3, z.ord
        FROM jsonb_array_elements(req->'checks') WITH ORDINALITY AS z(c, ord)) s
   WHERE NOT EXISTS (SELECT 1 FROM statepact_resources r WHERE r.name = s.name)
   ORDER BY s.src, s.ord LIMIT 1;
  IF missing IS NOT NULL THEN
    RETURN jsonb_build_object('error', 'resource_not_found', 'resource', missing);
  END IF;

  -- The share lock orders this commit with a concurrent acquisition of the same lease.
  FOR fc IN SELECT x->>'resource' AS resource, (x->>'token')::bigint AS token
              FROM jsonb_array_elements(req->'fences') WITH ORDINALITY AS t(x, ord) ORDER BY t.ord
  LOOP
    SELECT l.token INTO hw FROM statepact_leases l WHERE l.resource = fc.resource FOR SHARE;
    hw := coalesce(hw, 0);
    IF fc.token <> hw OR hw = 0 THEN
      RETURN jsonb_build_object('error', 'fence', 'resource', fc.resource, 'token', fc.token,
                                'high_water', hw);
    END IF;
  END LOOP;

  FOR ck IN SELECT x->>'resource' AS resource, x->>'key' AS key,
                   (x->>'expected')::bigint AS expected
              FROM jsonb_array_elements(req->'checks') WITH ORDINALITY AS t(x, ord) ORDER BY t.ord
  LOOP
    SELECT k.version INTO found_v FROM statepact_keys k
     WHERE k.resource = ck.resource AND k.key = ck.key;
    found_v := coalesce(found_v, 0);
    IF found_v <> ck.expected THEN
      RETURN jsonb_build_object('error', 'conflict', 'resource', ck.resource, 'key', ck.key,
                                'expected', ck.expected, 'found', found_v);
    END IF;
  END LOOP;

  WITH bumped AS (
    UPDATE statepact_resources r SET version = r.version + 1
     WHERE r.name IN (SELECT w->>'resource' FROM jsonb_array_elements(req->'writes') w)
    RETURNING r.name, r.version)
  SELECT jsonb_object_agg(b.name, b.version) INTO versions FROM bumped b;

  INSERT INTO statepact_keys AS k (resource, key, value, version)
  SELECT DISTINCT ON (t.w->>'resource', t.w->>'key')
         t.w->>'resource', t.w->>'key', CASE WHEN t.w ? 'value' THEN t.w->'value' END, r.version
    FROM jsonb_array_elements(req->'writes') WITH ORDINALITY AS t(w, ord)
    JOIN statepact_resources r ON r.name = t.w->>'resource'
   ORDER BY t.w->>'resource', t.w->>'key', t.ord DESC
  ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version;

  result := jsonb_build_object('versions', coalesce(versions, '{}'::jsonb), 'replayed', false);
  IF idem IS NOT NULL THEN
    INSERT INTO statepact_idempotency AS i (key, fingerprint, result, expires_at)
    VALUES (idem, req->>'fingerprint', result,
            clock_timestamp() + (req->>'retention_ms')::bigint * interval '1 millisecond')
    ON CONFLICT (key) DO UPDATE
      SET fingerprint = EXCLUDED.fingerprint, result = EXCLUDED.result,
          expires_at = EXCLUDED.expires_at;
  END IF;
  -- Purge a bounded batch of expired records, so no commit pays for a large backlog.
  DELETE FROM statepact_idempotency i WHERE i.key IN (
    SELECT j.key FROM statepact_idempotency j WHERE j.expires_at <= clock_timestamp()
     LIMIT 100 FOR UPDATE SKIP LOCKED);
  RETURN result;
END $$;
