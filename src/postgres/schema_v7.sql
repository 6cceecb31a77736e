-- statepact schema, version 7: statepact_commit's purge of expired idempotency records finds them
-- through the expiry index. Version 2 bounded the purge by clock_timestamp(), which is volatile:
-- the planner can neither use it in an index condition nor estimate it, so with many live records
-- it scanned the whole table in every commit (a million live records took the commits from 2,268
-- to 15 a second). now() (the transaction's start) is stable, so the purge reads the index from
-- its oldest entry and stops at the first live one; a record expiring during the transaction goes
-- with a later commit. Everything else is version 2's function as it was. Runs after version 6,
-- in the same transaction under the migration advisory lock. Written so that running it twice
-- changes nothing.

-- Version 2's commit: a write to a resource whose policy requires a fence must come with a fence
-- for that resource; the first such resource in name order (bytewise, as the client sorts) is
-- reported.
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
  -- Purge a bounded batch of the oldest expired records, so no commit pays for a large backlog.
  DELETE FROM statepact_idempotency i WHERE i.key IN (
    SELECT j.key FROM statepact_idempotency j WHERE j.expires_at <= now()
     ORDER BY j.expires_at LIMIT 100 FOR UPDATE SKIP LOCKED);
  RETURN result;
END $$;
