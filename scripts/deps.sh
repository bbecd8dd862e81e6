#!/usr/bin/env bash
# deps.sh [--test] — installs the servers and tools `make run` needs, only
# those that are missing: redis-server, mariadbd (+ mariadb-install-db) and
# wrk; with --test also chromium (the browser tests of `make test`),
# promtool (Debian's prometheus package: the alert rule tests) and
# docker-compose (Debian's, used only for `docker-compose config`, which
# validates docker-compose.yml without a Docker engine) and sqlite3 (the
# shell builds the reconciler test's million orders). When all are
# present it does not touch apt at all. Debian/Ubuntu, as root (or with
# sudo).
set -euo pipefail

have() {
	command -v "$1" >/dev/null 2>&1 && return 0
	local d
	for d in /usr/sbin /usr/local/sbin; do
		[ -x "$d/$1" ] && return 0
	done
	return 1
}

missing=()
have redis-server || missing+=(redis-server)
{ have mariadbd && have mariadb-install-db; } || missing+=(mariadb-server)
have wrk || missing+=(wrk)
if [ "${1:-}" = --test ]; then
	have chromium || missing+=(chromium)
	have promtool || missing+=(prometheus)
	have docker-compose || missing+=(docker-compose)
	have sqlite3 || missing+=(sqlite3)
fi

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: redis-server, mariadbd, wrk${1:+, chromium, promtool, docker-compose and sqlite3} are installed"
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "deps: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
	sudo=(sudo)
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Keep the packages' init scripts from starting system-wide redis/mariadb
# services during the install: the tests start their own on free ports.
# Only a policy-rc.d we create is removed again.
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	created_policy=1
fi
cleanup() { [ -z "$created_policy" ] || "${sudo[@]}" rm -f "$policy"; }
trap cleanup EXIT

"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
