#!/usr/bin/env bash
#
# Runs the README's examples in order, as a new user pastes them, against a
# fresh `make run` (scripts/run.sh with its data in a temporary directory
# and free ports), and fails on the first one that does not work.
#
#   scripts/readme-check.sh [FILE.md]     # default README.md
#
# Every ```sh block runs in one bash session (variables carry over from one
# block to the next) in a scratch directory where bin/, sdk/ and .data/ are
# what they are in the repository after `make run`; every ```python block
# runs with a Python that has sdk/python installed. A block fails when it
# exits non-zero or prints a problem (`"type":"/problems/…`) that the README
# does not announce. The line just before a block may say
#
#   <!-- readme-check: skip: WHY -->        not run (make run itself, Docker)
#   <!-- readme-check: expect CODE -->      must fail with problem CODE
#
# Environment: README_CHECK_PYTHON, a python3 with sdk/python installed
# (default: a venv made here, as scripts/test.sh does); README_CHECK_KEEP=1
# keeps the temporary directory (each block's output is in out/N).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

doc=${1:-README.md}
[[ -f "$doc" ]] || die "no such file: $doc"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentfs-readme.XXXXXX")
chmod 755 "$tmp"
run_pid=""
# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	set +e
	if [[ -n "$run_pid" ]]; then
		# TERM: a background job of a script ignores INT. run.sh stops its servers.
		kill -TERM "$run_pid" 2>/dev/null
		wait "$run_pid" 2>/dev/null
	fi
	if ((status == 0)) && [[ "${README_CHECK_KEEP:-}" != 1 ]]; then
		rm -rf "$tmp"
	else
		log "README check: the servers' logs and each block's output are in $tmp"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ensure_deps pg s3 python jq
py=${README_CHECK_PYTHON:-}
if [[ -z "$py" ]]; then
	python_sdk_venv "$tmp/py-venv" >/dev/null
	py=$tmp/py-venv/bin/python
fi

# A fresh make run, on ports of its own.
pg_port=$(free_port)
s3_port=$(free_port "$pg_port")
api_port=$(free_port "$pg_port" "$s3_port")
log "README check: starting scripts/run.sh (data in $tmp/data, API on 127.0.0.1:$api_port) ..."
env -u AGENTFS_DATABASE_URL -u AGENTFS_S3_ENDPOINT -u AGENTFS_URL -u AGENTFS_TOKEN \
	AGENTFS_DEV_DATA_DIR="$tmp/data" AGENTFS_DEV_PG_PORT="$pg_port" AGENTFS_DEV_S3_PORT="$s3_port" \
	AGENTFS_LISTEN_ADDR="127.0.0.1:$api_port" scripts/run.sh >"$tmp/run.log" 2>&1 &
run_pid=$!
for ((i = 0; i < 600; i++)); do
	[[ -s "$tmp/data/agentfs.env" ]] && grep -q 'Press Ctrl-C' "$tmp/run.log" && break
	_pid_alive "$run_pid" || {
		cat "$tmp/run.log" >&2
		die "README check: scripts/run.sh exited"
	}
	sleep 0.5
done
grep -q 'Press Ctrl-C' "$tmp/run.log" || die "README check: scripts/run.sh did not become ready; see $tmp/run.log"

# The scratch directory a user's checkout looks like after make run. The
# README's URL is make run's default; this run's port stands in for it.
work=$tmp/work
mkdir -p "$work"
ln -s "$REPO_ROOT/bin" "$work/bin"
ln -s "$REPO_ROOT/sdk" "$work/sdk"
ln -s "$tmp/data" "$work/.data"

# The blocks, as one script.
script=$tmp/blocks.sh
awk -v doc="$doc" -v out="$tmp/out" -v py="$py" -v port="$api_port" '
/^```(sh|python)[[:space:]]*$/ && !inblock {
	inblock = 1; lang = substr($0, 4); sub(/[[:space:]]*$/, "", lang)
	start = NR; body = ""; m = marker; next
}
/^```[[:space:]]*$/ && inblock {
	inblock = 0; n++
	if (m ~ /readme-check: skip/) { printf "note %d %d skip\n", n, start; marker = ""; next }
	expect = ""
	if (m ~ /readme-check: expect /) { expect = m; sub(/.*readme-check: expect /, "", expect); sub(/[[:space:]]*-->.*/, "", expect) }
	gsub(/127\.0\.0\.1:8080/, "127.0.0.1:" port, body)
	if (lang == "python") {
		printf "cat >%s/%d.py <<'\''README_PY_EOF'\''\n%sREADME_PY_EOF\n", out, n, body
		printf "{ %s %s/%d.py; } >%s/%d 2>&1 </dev/null\n", py, out, n, out, n
	} else {
		printf "{\n%s} >%s/%d 2>&1 </dev/null\n", body, out, n
	}
	printf "check %d %d $? %s\n", n, start, expect
	marker = ""; next
}
inblock { body = body $0 "\n"; next }
/^[[:space:]]*$/ { next }
{ marker = $0 }
' "$doc" >"$tmp/blocks.body"

mkdir -p "$tmp/out"
cat >"$script" <<EOF
set -uo pipefail
cd "$work"
doc="$doc"
out="$tmp/out"
$(declare -f log)
note() { log "README check: block \$1 (\$doc:\$2) not run (marked skip)"; }
check() {
	local n=\$1 line=\$2 rc=\$3 expect=\${4:-}
	if [[ -n "\$expect" ]]; then
		if ! grep -q "\$expect" "\$out/\$n"; then
			log "README check: block \$n (\$doc:\$line) should fail with \$expect; it printed:"
			cat "\$out/\$n" >&2
			exit 1
		fi
		log "README check: block \$n (\$doc:\$line) failed with \$expect, as announced"
		return
	fi
	if ((rc != 0)) || grep -q '"type":"/problems/' "\$out/\$n"; then
		log "README check: block \$n (\$doc:\$line) failed (exit \$rc); it printed:"
		cat "\$out/\$n" >&2
		exit 1
	fi
	log "README check: block \$n (\$doc:\$line) ok"
}
EOF
cat "$tmp/blocks.body" >>"$script"
echo 'log "README check: every block of $doc ran as written"' >>"$script"

env -u AGENTFS_URL -u AGENTFS_TOKEN -u AGENTFS_AGENT_ID -u AGENTFS_RUN_ID HOME="$work" bash "$script"
