#!/usr/bin/env bash
# mariadb-test.sh start|stop|dsn — one throwaway MariaDB for a whole `make test`:
# internal/testenv/cmd/mariadb (its doc says what each verb does), run from
# the repository root. start prints the DSN on stdout, the only thing it
# prints there; the state file is $SECKILL_MARIADB_STATE.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${GO:-go}" run ./internal/testenv/cmd/mariadb "$@"
