#!/usr/bin/env bash
# promtool-test.sh — checks the Prometheus alert rules
# (deploy/prometheus/alerts.yml) and runs their rule tests (alerts_test.yml
# beside them: every alert firing and not firing). `make test` runs it. Fails
# when promtool is missing: `scripts/deps.sh --test` installs it (Debian's
# prometheus package). Whether every metric the rules name exists is checked
# by cmd/seckill/app's TestAlertRulesUseOnlyDocumentedMetrics.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=deploy/prometheus

if ! command -v promtool >/dev/null 2>&1; then
	echo "promtool-test: promtool is not installed; scripts/deps.sh --test installs it (apt-get install prometheus)" >&2
	exit 1
fi
echo "== promtool check rules $dir/alerts.yml"
promtool check rules "$dir/alerts.yml"
echo "== promtool test rules $dir/alerts_test.yml"
promtool test rules "$dir/alerts_test.yml"
