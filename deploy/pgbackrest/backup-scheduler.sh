#!/bin/sh
# The backup scheduler (compose service `backup`, beside `db`): creates the stanza, takes a
# full backup every BACKUP_FULL_INTERVAL seconds and an incremental every
# BACKUP_INCR_INTERVAL seconds (pgBackRest expires what repo1-retention-full no longer
# keeps after each), and every BACKUP_CHECK_INTERVAL seconds records `pgbackrest info` in
# the table backup.pgbackrest_info (record-info.sql) that /metrics reads.
# It shares the database's data volume (read-only) and socket directory: pgBackRest copies
# the files itself and talks to PostgreSQL over the local socket.
# Runs as the postgres user. PGUSER and PGDATABASE: the role and database to record into.
set -u
stanza=${PGBACKREST_STANZA:-main}
full_every=${BACKUP_FULL_INTERVAL:-86400}
incr_every=${BACKUP_INCR_INTERVAL:-3600}
check_every=${BACKUP_CHECK_INTERVAL:-60}
socket=${PGHOST:-/run/postgresql}
export PGHOST=$socket

log () { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) backup-scheduler: $*"; }

# record ERROR: `pgbackrest info` into the table, with ERROR (empty: none).
record () {
  error=$1
  info=$(pgbackrest --stanza="$stanza" info --output=json 2>/tmp/info.err) || {
    error="${error:+$error; }pgbackrest info failed: $(tr '\n' ' ' </tmp/info.err)"
    info=''
  }
  # The repository answers but says something is wrong (status code 0 is "ok").
  if [ -n "$info" ]; then
    status=$(printf '%s' "$info" | jq -r --arg s "$stanza" '.[] | select(.name == $s) | "\(.status.code) \(.status.message)"')
    case "$status" in
      "0 "*|"") ;;
      # 2 is "no valid backups": the first full backup has not ended yet.
      "2 "*) [ -n "$error" ] || error="pgbackrest info: $status" ;;
      *) error="${error:+$error; }pgbackrest info: $status" ;;
    esac
  fi
  psql -X -q -v ON_ERROR_STOP=1 -v stanza="$stanza" -v info="$info" -v error="$error" \
    -f /etc/pgbackrest/record-info.sql >/dev/null 2>/tmp/record.err ||
    log "cannot record the backup state in the database: $(tr '\n' ' ' </tmp/record.err)"
  [ -z "$error" ] || log "$error"
}

# newest STOP time (epoch seconds) of the backups of TYPE (full, or any), 0 when none.
newest () {
  pgbackrest --stanza="$stanza" info --output=json 2>/dev/null |
    jq -r --arg s "$stanza" --arg t "$1" '[.[] | select(.name == $s) | .backup[]? | select($t == "any" or .type == $t) | .timestamp.stop] | max // 0'
}

# Under Patroni every member runs this beside PostgreSQL (deploy/ha/member.sh) with
# BACKUP_WHEN_PRIMARY set to its REST API's /primary: only the current primary backs up and
# records, and after a failover the new primary takes over the schedule from the repository.
is_primary () { [ -z "${BACKUP_WHEN_PRIMARY:-}" ] || curl -fsS -o /dev/null -m 5 "$BACKUP_WHEN_PRIMARY"; }

until pg_isready -q -h "$socket"; do sleep 2; done
log "PostgreSQL is up; stanza $stanza, full every ${full_every}s, incremental every ${incr_every}s, check every ${check_every}s"
stanza_made=''

while :; do
  # A member that is not the primary asks again soon: one promoted (or the first primary,
  # whose REST API answers /primary a little after PostgreSQL is up) takes over the schedule
  # within seconds, not a whole check interval later.
  if ! is_primary; then sleep 5; continue; fi
  if [ -z "$stanza_made" ]; then
    if pgbackrest --stanza="$stanza" stanza-create; then stanza_made=1
    else
      record "stanza-create failed (repository unreachable or not writable?)"
      sleep "$check_every"
      continue
    fi
  fi
  now=$(date +%s)
  last_full=$(newest full); last_full=${last_full:-0}
  last_any=$(newest any); last_any=${last_any:-0}
  type=''
  if [ $((now - last_full)) -ge "$full_every" ]; then type=full
  elif [ $((now - last_any)) -ge "$incr_every" ]; then type=incr
  fi
  error=''
  if [ -n "$type" ]; then
    log "starting a $type backup"
    if pgbackrest --stanza="$stanza" backup --type="$type" 2>/tmp/backup.err; then
      log "$type backup done"
    else
      error="$type backup failed: $(tail -n 3 /tmp/backup.err | tr '\n' ' ')"
    fi
  fi
  record "$error"
  sleep "$check_every"
done
