#!/usr/bin/env bash
# scripts/exported-count.sh: exported identifiers per package, for every
# package of every module in the repository (root and the nested modules of
# .ci/run), counted from the non-test files by scripts/exportcount.
# Usage: scripts/exported-count.sh    (run from anywhere in the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dirs=()
for m in . pg contrib/prometheus contrib/cron bench/peers test/browser; do
	while IFS= read -r d; do
		d=${d#"$PWD"}
		dirs+=(".${d}")
	done < <(cd "$m" && go list -f '{{.Dir}}' ./...)
done
go run scripts/exportcount/main.go "${dirs[@]}"
