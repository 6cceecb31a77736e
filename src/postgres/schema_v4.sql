-- statepact schema, version 4: statepact_lock answers in the vocabulary every backend shares
-- ('resource_not_found', as the commit function and the Redis scripts say; 'ok' also for a key
-- not yet written, whose value is NULL and version 0). Runs after version 3, in the same
-- transaction under the migration advisory lock. Written so that running it twice changes nothing.

-- A pessimistic session's lock on one key, inside its transaction. Lock failures are caught (the
-- block is a subtransaction) and reported as a status, so the session's transaction and the
-- locks it already holds survive a timeout or a refused deadlock.
CREATE OR REPLACE FUNCTION statepact_lock(p_resource text, p_key text, p_exclusive boolean,
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
    o_status := 'resource_not_found';
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
  o_status := 'ok';
  o_value := v;
  o_version := coalesce(ver, 0);
  RETURN NEXT;
END $$;
