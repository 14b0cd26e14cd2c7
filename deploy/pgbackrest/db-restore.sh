#!/bin/sh
# Point-in-time restore of the `db` service's cluster (compose service `db-restore`):
#   docker compose stop db backup
#   docker compose run --rm db-restore --target '2026-11-28 10:30:00+00' [--delta]
#   docker compose up -d
# Picks the newest backup that ended before the target, restores it into the data volume,
# then replays the archived WAL up to the target in this container and promotes the
# cluster, so that it ends with a database that has reached the target (or says why not).
# Refuses, before writing anything, a time it cannot reach: unreadable, in the future,
# older than every backup in the repository; and a data directory that still holds a
# database unless --delta is given (pgBackRest then rewrites only the files that differ).
# Exit codes: 0 restored; 2 refused (nothing written); 1 failed after the restore began.
set -eu
stanza=${PGBACKREST_STANZA:-main}
PGDATA=${PGDATA:-/var/lib/postgresql/data}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
export PATH="$bin:$PATH"

say () { echo "db-restore: $*" >&2; }
refuse () { say "REFUSED: $*"; say "nothing was written to $PGDATA"; exit 2; }
as_postgres () { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }

target='' delta=''
while [ $# -gt 0 ]; do
  case "$1" in
    --target) [ $# -ge 2 ] || refuse "--target needs a time, e.g. --target '2026-11-28 10:30:00+00'"; target=$2; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    --delta) delta=--delta; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) refuse "unknown argument '$1' (usage: --target TIME [--delta])" ;;
  esac
done
[ -n "$target" ] || refuse "give the time to restore to: --target '2026-11-28 10:30:00+00' (UTC unless it names a zone)"

epoch=$(date -u -d "$target" +%s 2>/dev/null) || refuse "cannot read the time '$target' (e.g. '2026-11-28 10:30:00+00' or 2026-11-28T10:30:00Z)"
# PostgreSQL's recovery_target_time, in UTC with microseconds, whatever form was given.
pg_target=$(date -u -d "$target" '+%Y-%m-%d %H:%M:%S.%6N+00')
now=$(date +%s)
[ "$epoch" -le "$now" ] || refuse "$pg_target is in the future (now: $(date -u '+%Y-%m-%d %H:%M:%S+00'))"

info=$(as_postgres pgbackrest --stanza="$stanza" info --output=json 2>&1) || refuse "cannot read the backup repository: $info"
backups=$(printf '%s' "$info" | jq -c --arg s "$stanza" '[.[] | select(.name == $s) | .backup[]? | {label: .label, type: .type, stop: .timestamp.stop}] | sort_by(.stop)')
[ "$(printf '%s' "$backups" | jq length)" -gt 0 ] || refuse "the repository holds no backup of stanza $stanza"
set_label=$(printf '%s' "$backups" | jq -r --argjson t "$epoch" '[.[] | select(.stop < $t)] | last | .label // empty')
if [ -z "$set_label" ]; then
  oldest=$(printf '%s' "$backups" | jq -r '.[0].stop | todate')
  refuse "no backup covers $pg_target: the oldest backup in the repository ended at $oldest (older points were expired by the retention, or never backed up)"
fi

if [ -s "$PGDATA/PG_VERSION" ] && [ -z "$delta" ]; then
  refuse "$PGDATA holds a database. Stop db and backup first, then add --delta to overwrite it in place (or remove the volume)"
fi
if [ -f "$PGDATA/postmaster.pid" ] && as_postgres pg_ctl -D "$PGDATA" status >/dev/null 2>&1; then
  refuse "PostgreSQL is running on $PGDATA: docker compose stop db backup"
fi

started=$(date +%s)
say "restoring backup $set_label, then the WAL up to $pg_target"
install -d -o postgres -g postgres -m 700 "$PGDATA"
install -d -o postgres -g postgres -m 2775 /run/postgresql
as_postgres pgbackrest --stanza="$stanza" restore --set="$set_label" $delta \
  --type=time --target="$pg_target" --target-action=promote
say "files restored in $(( $(date +%s) - started )) s; replaying the WAL"

# Recovery here, with the service's own configuration (archiving on: the new timeline's
# first segments reach the repository), on the local socket only.
log=/tmp/recovery.log
if ! as_postgres pg_ctl -D "$PGDATA" -l "$log" -t 3600 -w \
  -o "-c config_file=/etc/postgresql/backup.conf -c listen_addresses=''" start >/dev/null; then
  say "FAILED: PostgreSQL did not reach a consistent state. Its log:"
  tail -n 20 "$log" >&2
  exit 1
fi
until [ "$(as_postgres psql -X -Atq -h /run/postgresql -U "${PGUSER:-postgres}" -d postgres -c 'select pg_is_in_recovery()' 2>/dev/null)" = f ]; do
  if ! as_postgres pg_ctl -D "$PGDATA" status >/dev/null 2>&1; then
    say "FAILED: recovery stopped before $pg_target. Its log:"
    tail -n 20 "$log" >&2
    say "the archived WAL does not reach that time: pick an earlier one (docs/operations.md)"
    exit 1
  fi
  sleep 1
done
grep -E 'recovery stopping|last completed transaction|selected new timeline' "$log" >&2 || true
as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
say "done in $(( $(date +%s) - started )) s: restored to $pg_target from backup $set_label. Start the service: docker compose up -d"
