#!/bin/sh
# deploy/stack.yml on a real multi-node swarm built on this machine (docs/deployment.md,
# "Docker Swarm"): Docker-in-Docker nodes from the team's swarm-lab.sh, the service's image
# built from this checkout, secrets made at random. test/swarm/ runs the faults on top.
#
#   scripts/swarm-stack.sh up [NODES]    nodes (3), images loaded, secrets, stack `ups` deployed;
#                                        waits until every node's proxy answers ready
#   scripts/swarm-stack.sh deploy IMAGE  the stack again with the API image IMAGE (a host
#                                        image, loaded first): a rolling update
#   scripts/swarm-stack.sh ips           each node's address (the proxy: http://IP:8080)
#   scripts/swarm-stack.sh down          everything removed (nodes, their volumes, the registry)
#
# Settings: SWARM_LAB (path of swarm-lab.sh), API_IMAGE (host tag to build and run,
# f-swarm-api:lab), DB_IMAGE (the same for deploy/postgres/Dockerfile, f-swarm-db:lab),
# SWARM_BUILD=0 (use both images as they are, no build),
# RATE_LIMIT_AUTH_MAX and PRODUCTS_MAX_PER_USER (the service's defaults when unset; the test
# raises them: its load logs in from one address and creates thousands of products),
# MAX_EVENT_LOOP_DELAY_MS (1000 here, 200 in production: on a shared 2-core machine, at
# load averages of 30-40, the default makes every replica's readiness flap 503, and each
# node's proxy can take all replicas out at once).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lab=${SWARM_LAB:-}
for f in "$lab" "$root/../shared/tools/swarm-lab.sh" /work/shared/tools/swarm-lab.sh; do
  [ -n "$f" ] && [ -f "$f" ] && { lab=$f; break; }
done
[ -f "$lab" ] || { echo "swarm-lab.sh not found (set SWARM_LAB)" >&2; exit 2; }
offline=$(dirname "$lab")/offline-base-images.sh
api_image=${API_IMAGE:-f-swarm-api:lab}
db_image=${DB_IMAGE:-f-swarm-db:lab}
stack=ups
manager=lab-swnode1
# The images the stack runs as they are; postgres:17-bookworm is the database image's base.
bases="redis:7-alpine haproxy:3.0-alpine"

on_manager () { docker exec -i "$manager" "$@"; }

base_images () {
  missing=""
  for im in $bases postgres:17-bookworm; do docker image inspect "$im" >/dev/null 2>&1 || docker pull -q "$im" >/dev/null 2>&1 || missing="$missing $im"; done
  # shellcheck disable=SC2086
  [ -z "$missing" ] || bash "$offline" $missing
}

# Pushes a host image through the lab's registry; prints the name the nodes pull.
load () { sh "$lab" load "$1" | tail -1; }

deploy () {
  image=$1
  sh "$lab" put "$root/deploy" >/dev/null
  on_manager env API_IMAGE="$image" DB_IMAGE="$db" IMAGE_PREFIX=lab-swreg:5000/lab/ PUBLIC_URL=http://localhost:8080 \
    MAX_EVENT_LOOP_DELAY_MS="${MAX_EVENT_LOOP_DELAY_MS:-1000}" API_UPDATE_MONITOR="${API_UPDATE_MONITOR:-10s}" \
    RATE_LIMIT_AUTH_MAX="${RATE_LIMIT_AUTH_MAX:-}" PRODUCTS_MAX_PER_USER="${PRODUCTS_MAX_PER_USER:-}" \
    sh -c "cd /stack && docker stack deploy --resolve-image never -c stack.yml $stack" >/dev/null
}

wait_ready () {
  # The update (if the deploy changed the API) over, every replica running (healthy) ...
  i=0
  until [ "$(on_manager docker service inspect ${stack}_api -f '{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}')" != updating ] &&
        [ "$(on_manager docker service ls --filter name=${stack}_api --format '{{.Replicas}}' | cut -d' ' -f1 | awk -F/ '$1 == $2')" != "" ]; do
    i=$((i+1)); [ $i -lt 600 ] || { echo "the API's update did not end in 600 s" >&2; exit 1; }
    sleep 1
  done
  # ... and every node's proxy answering.
  for n in $(nodes); do
    ip=$(sh "$lab" ip "$n"); i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$ip:8080/health/ready")" = 200 ]; do
      i=$((i+1)); [ $i -lt 300 ] || { echo "node $n: proxy not ready after 300 s" >&2; on_manager docker service ps --no-trunc $stack"_api" >&2; exit 1; }
      sleep 1
    done
  done
}

nodes () { docker ps --format '{{.Names}}' | sed -n 's/^lab-swnode\([0-9]*\)$/\1/p' | sort -n; }

case "${1:-}" in
up)
  n=${2:-3}
  sh "$lab" up "$n" >/dev/null
  base_images
  [ "${SWARM_BUILD:-1}" = 0 ] || {
    docker build -q -t "$api_image" "$root" >/dev/null
    docker build -q -t "$db_image" -f "$root/deploy/postgres/Dockerfile" "$root/deploy" >/dev/null
  }
  for im in $bases; do load "$im" >/dev/null; done
  db=$(load "$db_image")
  api=$(load "$api_image")
  on_manager docker node update --label-add db=true "$manager" >/dev/null
  for s in secret:48 db_password:24 admin_api_keys:32; do
    name=ups_${s%%:*}
    on_manager docker secret inspect "$name" >/dev/null 2>&1 ||
      head -c "${s##*:}" /dev/urandom | base64 -w0 | on_manager docker secret create "$name" - >/dev/null
  done
  # No mail server in the lab: the outbox keeps the messages and retries.
  on_manager docker secret inspect ups_smtp_url >/dev/null 2>&1 ||
    printf %s 'smtp://lab:lab@smtp.invalid:587' | on_manager docker secret create ups_smtp_url - >/dev/null
  deploy "$api"
  wait_ready
  echo "$api" ;;
deploy)
  db=$(load "$db_image")
  api=$(load "$2")
  deploy "$api"
  echo "$api" ;;
ips) for n in $(nodes); do sh "$lab" ip "$n"; done ;;
down) sh "$lab" down ;;
*) sed -n '2,15p' "$0"; exit 2 ;;
esac
