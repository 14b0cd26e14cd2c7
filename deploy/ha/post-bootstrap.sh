#!/bin/sh
# Patroni runs this once, on the member that initialises the cluster, with a connection
# string to it as $1: the service's database, as the postgres image makes POSTGRES_DB.
set -eu
name=${DB_NAME:-app}
exists=$(psql "$1" -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'")
[ "$exists" = 1 ] || psql "$1" -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$name\""
