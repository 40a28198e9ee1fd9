#!/usr/bin/env bash
#
# Run every Go fuzz target (func FuzzXxx) in the module for FUZZTIME each
# (default 20s), one target at a time. Each runs through scripts/test.sh, so
# the handler targets, which drive the real API, get throwaway Postgres and
# S3 servers like every other test.
#
#   scripts/fuzz.sh              # what `make fuzz` runs
#   FUZZTIME=2m scripts/fuzz.sh
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

FUZZTIME=${FUZZTIME:-20s}

# `go test -list` prints the matching names of a package, then "ok <pkg> ...".
listing=$(go test -list '^Fuzz' ./...)
targets=()
while read -r pkg name; do
	[[ -n "$pkg" && -n "$name" ]] && targets+=("$pkg $name")
done < <(printf '%s\n' "$listing" | awk '
	$1 ~ /^Fuzz/ && NF == 1 { names[++n] = $1; next }
	$1 == "ok" { for (i = 1; i <= n; i++) print $2, names[i]; n = 0; next }
	{ n = 0 }
')

if ((${#targets[@]} == 0)); then
	echo "no fuzz targets found"
	exit 0
fi

failed=()
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	echo "==> fuzzing $name in $pkg for $FUZZTIME"
	if ! AGENTFS_TEST_PYTHON=0 bash scripts/test.sh "$pkg" -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=20x; then
		failed+=("$pkg $name")
	fi
done

echo "fuzz: ${#targets[@]} targets, ${#failed[@]} failed"
if ((${#failed[@]} > 0)); then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
