#!/bin/sh
# The entrypoint of docker-compose.yml's redis services: redis-server with
# seckill's ACL users (users.acl beside this file), each {{name}} filled
# with $REDIS_<NAME>_PASSWORD, and the user a replica authenticates to its
# primary with. The passwords go into files only this container's redis
# user reads, never into the command line (ps shows it). The arguments are
# redis-server's own ("redis-server --appendonly yes …").
set -eu
for v in REDIS_EDGE_PASSWORD REDIS_ENGINE_PASSWORD REDIS_CONSUMER_PASSWORD REDIS_REPLICA_PASSWORD; do
  eval "p=\${$v:-}"
  case "$p" in
    '' | *[!0-9a-fA-F]*)
      echo "$v must be set, in hex (openssl rand -hex 32)" >&2
      exit 1
      ;;
  esac
done
umask 077
d=/tmp/seckill-redis
mkdir -p "$d"
grep '^user ' /etc/seckill/redis/users.acl | sed \
  -e "s/{{edge}}/$REDIS_EDGE_PASSWORD/" -e "s/{{engine}}/$REDIS_ENGINE_PASSWORD/" \
  -e "s/{{consumer}}/$REDIS_CONSUMER_PASSWORD/" -e "s/{{replica}}/$REDIS_REPLICA_PASSWORD/" >"$d/users.acl"
printf 'aclfile %s/users.acl\nmasteruser replica\nmasterauth %s\n' "$d" "$REDIS_REPLICA_PASSWORD" >"$d/auth.conf"
chown -R redis:redis "$d"
shift # redis-server: the image's entrypoint runs it as the redis user
exec docker-entrypoint.sh redis-server "$d/auth.conf" "$@"
