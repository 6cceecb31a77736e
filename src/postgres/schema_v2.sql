-- statepact schema, version 2: per-resource policy (fence required). Runs like version 1, after
-- it, in the same transaction under the migration advisory lock. Written so that running it twice
-- changes nothing. Resources registered before it get fence_required = false.

ALTER TABLE statepact_resources
  ADD COLUMN IF NOT EXISTS fence_required boolean NOT NULL DEFAULT false;

-- Registration with a policy: the row, its policy and its initial keys in one statement's
-- transaction. An existing resource is left as it is (policy too). The two-argument version 1
-- function stays for clients that predate this version.
CREATE OR REPLACE FUNCTION statepact_register(p_name text, p_state jsonb, p_fence_required boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO statepact_resources (name, version, fence_required)
  VALUES (p_name, 0, p_fence_required) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO statepact_keys (resource, key, value, version)
  SELECT p_name, e.key, e.value, 0 FROM jsonb_each(p_state) e
  ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value, version = 0;
  RETURN true;
END $$;

-- The UPDATE takes the row lock a commit takes (FOR NO KEY UPDATE), so a policy change and a
-- commit of the resource are ordered: the commit sees the policy in force when it runs. Returns
-- false when the resource is not registered.
CREATE OR REPLACE FUNCTION statepact_set_policy(p_name text, p_fence_required boolean)
RETURNS boolean
LANGUAGE sql AS $$
  WITH changed AS (
    UPDATE statepact_resources r SET fence_required = p_fence_required
     WHERE r.name = p_name RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM changed)
$$;

-- NULL when the resource is not registered.
CREATE OR REPLACE FUNCTION statepact_policy(p_name text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT r.fence_required FROM statepact_resources r WHERE r.name = p_name
$$;

-- Version 1's commit with one more check, after the fences and before the read checks: a write to
-- a resource whose policy requires a fence must come with a fence for that resource (the loop
-- above already proved it current). The first such resource in name order (bytewise, as the
-- client sorts) is reported.
CREATE OR REPLACE FUNCTION statepact_commit(req jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  idem text := req->>'idempotency_key';
  rec record;
  fc record;
  ck record;
  missing text;
  unfenced text;
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

  SELECT r.name INTO unfenced FROM statepact_resources r
   WHERE r.fence_required
     AND r.name IN (SELECT w->>'resource' FROM jsonb_array_elements(req->'writes') w)
     AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(req->'fences') f
                      WHERE f->>'resource' = r.name)
   ORDER BY r.name COLLATE "C" LIMIT 1;
  IF unfenced IS NOT NULL THEN
    RETURN jsonb_build_object('error', 'fence_required', 'resource', unfenced);
  END IF;

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
