-- statepact schema, version 8: statepact_acquire never gives a new owner the token of the lease it
-- takes over, whatever the server's clock does. Version 6's upsert read clock_timestamp() once to
-- decide that the lease had expired (the WHERE) and again to decide whether to keep the token (the
-- SET): a clock stepping back between the two (an NTP step, a resumed VM) handed the new owner the
-- old owner's token, and storage then took the old owner's fenced writes. Now the clock is read
-- once for the whole decision, after the row lock, and a change of owner always moves the token
-- on. Same signature, columns and answers. Runs after version 7, in the same transaction under the
-- migration advisory lock. Written so that running it twice changes nothing.

-- acquire as one upsert: free or expired (released is expired) -> next token; live and same owner
-- -> extend, same token; live and another owner -> 'busy' with the holder. ON CONFLICT locks the
-- existing row before it weighs the WHERE clause; `n` is read at its first use, there, so after
-- the lock, and the WHERE and the SET see that one reading. A new row needs no decision: it gets
-- token 1 and its own reading. Same as the statement the client sends first (statements.hpp).
CREATE OR REPLACE FUNCTION statepact_acquire(p_resource text, p_owner text, p_ttl_ms bigint)
RETURNS TABLE (o_status text, o_owner text, o_token bigint, o_expires_us bigint, o_ttl_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  cur statepact_leases%ROWTYPE;
  ttl interval := p_ttl_ms * interval '1 millisecond';
BEGIN
  WITH n AS MATERIALIZED (SELECT clock_timestamp() AS t)
  INSERT INTO statepact_leases AS l (resource, owner, token, expires_at, ttl_ms)
  VALUES (p_resource, p_owner, 1, clock_timestamp() + ttl, p_ttl_ms)
  ON CONFLICT (resource) DO UPDATE
     SET token = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > (SELECT n.t FROM n)
                      THEN l.token ELSE l.token + 1 END,
         owner = EXCLUDED.owner, expires_at = (SELECT n.t FROM n) + ttl, ttl_ms = EXCLUDED.ttl_ms
   WHERE l.expires_at <= (SELECT n.t FROM n) OR l.owner = EXCLUDED.owner
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
