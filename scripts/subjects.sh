#!/usr/bin/env bash
# Commit subjects stay short (≤ 72 characters) from SINCE on: the lint's
# check of the habit. Older history is left as it was written. Outside a
# git checkout, or in one without SINCE (a shallow clone), it says so and
# passes.
set -euo pipefail
SINCE=${SUBJECTS_SINCE:-aa0a49d}
MAX=${SUBJECTS_MAX:-72}
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "subjects: not a git checkout; skipped"
	exit 0
fi
if ! git cat-file -e "$SINCE^{commit}" 2>/dev/null; then
	echo "subjects: $SINCE is not in this clone; skipped"
	exit 0
fi
export LC_ALL=C.UTF-8 # ${#s} counts characters, not bytes
long=""
while IFS= read -r line; do
	s=${line#* }
	if [ "${#s}" -gt "$MAX" ]; then long+="$line"$'\n'; fi
done < <(git log --no-merges --format='%h %s' "$SINCE..HEAD")
if [ -n "$long" ]; then
	echo "subjects: these commit subjects are over $MAX characters:"
	printf %s "$long"
	exit 1
fi
