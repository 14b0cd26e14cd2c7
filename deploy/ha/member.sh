#!/bin/sh
# A PostgreSQL member of the HA database: Patroni, and beside it the backup scheduler, which
# acts only while this member is the primary (its REST API's /primary answers 200).
set -eu
BACKUP_WHEN_PRIMARY=http://127.0.0.1:8008/primary backup-scheduler &
exec patroni /etc/patroni/patroni.yml
