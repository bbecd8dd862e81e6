#!/usr/bin/env bash
# mariadb-test.sh start|stop|dsn — one throwaway MariaDB for a whole `make test`.
#
#   start  initialises a datadir under a fresh temp dir (mariadb-install-db),
#          runs mariadbd as root on a free 127.0.0.1 port with
#          --skip-grant-tables, waits until it answers and prints its DSN
#          (root@tcp(127.0.0.1:PORT)/) on stdout, the only thing it prints
#          there. Tests read that DSN from $SECKILL_TEST_MYSQL_DSN.
#   stop   stops the server that start recorded (by PID, after checking the
#          PID still runs mariadbd on our datadir) and removes its temp dir.
#   dsn    prints the DSN of the running server.
#
# The temp dir's path is recorded in the state file $SECKILL_MARIADB_STATE
# (default: one per checkout under ${TMPDIR:-/tmp}); make test uses a state
# file of its own, so two runs never share or stop each other's server.
# This script never signals a process it did not start.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=${TMPDIR:-/tmp}
state=${SECKILL_MARIADB_STATE:-$tmp/seckill-mariadb-test-$(printf %s "$root" | md5sum | cut -c1-12).state}

log() { echo "mariadb-test: $*" >&2; }

find_bin() {
	local n d
	for n in "$@"; do
		if command -v "$n" >/dev/null 2>&1; then command -v "$n"; return 0; fi
		for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
			if [ -x "$d/$n" ]; then echo "$d/$n"; return 0; fi
		done
	done
	return 1
}

# ours PID DIR: PID is alive and is the mariadbd we started on DIR/data
# (guards against a recycled PID).
ours() {
	local pid=$1 dir=$2
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--datadir=$dir/data"
}

# remove_dir removes a temp dir this script made, and nothing else.
remove_dir() {
	case "$1" in
	"$tmp"/seckill-mariadb.*) rm -rf -- "$1" ;;
	esac
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! port_in_use "$p"; then echo "$p"; return 0; fi
	done
	return 1
}

start() {
	if [ -s "$state" ]; then
		local old
		old=$(cat "$state")
		if [ -d "$old" ] && ours "$(cat "$old/pid" 2>/dev/null || true)" "$old"; then
			log "already running (state $state); run '$0 stop' first"
			exit 1
		fi
		log "removing stale state $state"
		remove_dir "$old"
	fi

	local mysqld install admin dir port pid i
	mysqld=$(find_bin mariadbd mysqld) || { log "mariadbd not found (make deps, or apt-get install -y mariadb-server)"; exit 1; }
	install=$(find_bin mariadb-install-db mysql_install_db) || { log "mariadb-install-db not found"; exit 1; }
	admin=$(find_bin mariadb-admin mysqladmin || true)

	dir=$(mktemp -d "$tmp/seckill-mariadb.XXXXXX")
	echo "$dir" >"$state"
	if ! "$install" --no-defaults --datadir="$dir/data" --user=root \
		--auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1; then
		log "mariadb-install-db failed:"
		cat "$dir/install.log" >&2
		remove_dir "$dir"; rm -f -- "$state"
		exit 1
	fi

	# A port can be taken between the probe and the bind: retry a few times.
	for attempt in 1 2 3 4 5; do
		port=$(free_port) || { log "no free port found"; break; }
		: >"$dir/error.log"
		# All three standard streams go to files: the caller reads our stdout
		# through $(...), which would wait for a server holding it open.
		"$mysqld" --no-defaults --datadir="$dir/data" --user=root \
			--port="$port" --bind-address=127.0.0.1 --socket="$dir/sock" \
			--pid-file="$dir/mariadbd.pid" --log-error="$dir/error.log" \
			--skip-grant-tables --skip-name-resolve --skip-log-bin \
			--innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=256M \
			--max-connections=1000 \
			</dev/null >>"$dir/stdout.log" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/pid"
		echo "$port" >"$dir/port"
		for i in $(seq 1 600); do # up to 60 s
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if [ -n "$admin" ]; then
				if "$admin" --no-defaults --protocol=tcp -h127.0.0.1 -P"$port" -uroot ping >/dev/null 2>&1; then
					echo "root@tcp(127.0.0.1:$port)/" | tee "$dir/dsn"
					log "started pid $pid on 127.0.0.1:$port (dir $dir)"
					return 0
				fi
			elif port_in_use "$port"; then
				echo "root@tcp(127.0.0.1:$port)/" | tee "$dir/dsn"
				log "started pid $pid on 127.0.0.1:$port (dir $dir)"
				return 0
			fi
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "mariadbd did not answer within 60s"
			kill -TERM "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			break
		fi
		wait "$pid" 2>/dev/null || true
		log "mariadbd exited (attempt $attempt), retrying on another port"
	done
	log "could not start mariadbd; error log:"
	cat "$dir/error.log" >&2 || true
	remove_dir "$dir"; rm -f -- "$state"
	exit 1
}

stop() {
	if [ ! -s "$state" ]; then
		log "nothing to stop (no state file $state)"
		return 0
	fi
	local dir pid i
	dir=$(cat "$state")
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	if ours "$pid" "$dir"; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 300); do # up to 30 s for a clean shutdown
			ours "$pid" "$dir" || break
			sleep 0.1
		done
		if ours "$pid" "$dir"; then
			log "pid $pid ignored SIGTERM for 30s, killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		log "stopped pid $pid"
	else
		log "pid '${pid}' is not our mariadbd any more; nothing to signal"
	fi
	remove_dir "$dir"
	rm -f -- "$state"
}

dsn() {
	[ -f "$state" ] && cat "$(cat "$state")/dsn"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
dsn) dsn ;;
*)
	echo "usage: $0 start|stop|dsn" >&2
	exit 2
	;;
esac
