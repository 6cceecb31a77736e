-- statepact schema, version 5: statepact_renew answers a lease of a resource never leased here
-- as every backend does, lost as 'released' with high-water mark 0 (version 1 said 'none', which
-- no client reads as a lease loss). Same signature and columns, so clients of earlier versions keep
-- working. Runs after version 4, in the same transaction under the migration advisory lock.
-- Written so that running it twice changes nothing.

-- renew: only the stored lease itself (same owner and token), and only while live. o_token is
-- the high-water mark when the renewal is refused.
CREATE OR REPLACE FUNCTION statepact_renew(p_resource text, p_owner text, p_token bigint,
                                           p_ttl_ms bigint)
RETURNS TABLE (o_status text, o_token bigint, o_expires_us bigint, o_ttl_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cur statepact_leases%ROWTYPE;
  now_ts timestamptz;
BEGIN
  SELECT * INTO cur FROM statepact_leases l WHERE l.resource = p_resource FOR UPDATE;
  now_ts := clock_timestamp();
  IF cur.resource IS NULL THEN
    o_status := 'released';
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
