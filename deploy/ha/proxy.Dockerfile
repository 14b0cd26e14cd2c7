# The HA database's `db` (docker-compose.ha.yml): HAProxy with deploy/ha/haproxy.cfg baked in.
# A build of its own, not `image: haproxy:...`: docker-compose.yml's `db` has a `build`, which an
# override file cannot remove, and Compose would build the PostgreSQL image and tag it as the
# HAProxy image named in `image`, replacing the proxy's base image on the host.
FROM haproxy:3.0-alpine
COPY ha/haproxy.cfg /usr/local/etc/haproxy/haproxy.cfg
