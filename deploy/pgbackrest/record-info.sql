-- What the backup scheduler (backup-scheduler.sh) records after each backup and each check:
-- `pgbackrest info --output=json` as printed, for the API's /metrics (src/plugins/metrics.ts),
-- which runs on other hosts than the database and its repository. Variables (psql -v):
-- stanza, info (the JSON, or empty when info itself failed), error (empty when all went well).
CREATE SCHEMA IF NOT EXISTS backup;
CREATE TABLE IF NOT EXISTS backup.pgbackrest_info (
  stanza text PRIMARY KEY,
  -- The last JSON `pgbackrest info` printed (kept when a later call fails).
  info jsonb NOT NULL DEFAULT '[]',
  -- When the scheduler last ran `pgbackrest info` (successfully or not).
  checked_at timestamptz NOT NULL DEFAULT now(),
  -- The last backup or info error, cleared by the next success.
  last_error text
);
INSERT INTO backup.pgbackrest_info AS row (stanza, info, checked_at, last_error)
VALUES (:'stanza', COALESCE(NULLIF(:'info', '')::jsonb, '[]'), now(), NULLIF(:'error', ''))
ON CONFLICT (stanza) DO UPDATE
SET info = CASE WHEN :'info' = '' THEN row.info ELSE EXCLUDED.info END,
    checked_at = EXCLUDED.checked_at,
    last_error = EXCLUDED.last_error;
