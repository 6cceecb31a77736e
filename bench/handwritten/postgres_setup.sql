-- Tables for the hand-written PostgreSQL baseline: the least a team would keep to fence writes by
-- hand (a lease row holding the newest token per resource, and versioned values).
CREATE TABLE IF NOT EXISTS handwritten_leases (
  resource text PRIMARY KEY,
  owner text NOT NULL,
  token bigint NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS handwritten_state (
  resource text NOT NULL,
  key text NOT NULL,
  value jsonb NOT NULL,
  version bigint NOT NULL,
  PRIMARY KEY (resource, key)
);
