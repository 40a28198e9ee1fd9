#!/usr/bin/env bash
#
# Run the Go test suite, then the Python SDK's, against throwaway servers,
# then the README's examples against a fresh make run (scripts/readme-check.sh).
#
#   scripts/test.sh                      # go test ./..., pytest sdk/python, the README
#   scripts/test.sh ./handlers/ -run X   # extra arguments go to go test (no README check)
#
# Starts a temporary Postgres and versitygw (S3) on free ports, exports
# AGENTFS_TEST_* for the tests, runs go test, then installs sdk/python into a
# venv (Debian's python3 and packages; see ensure_deps) and runs its pytest
# suite against the same servers, and stops everything again. The exit
# status fails if any part failed. AGENTFS_TEST_PYTHON=0 skips the Python
# suite and the README check (scripts/fuzz.sh runs go test only);
# AGENTFS_TEST_README=0 skips the README check alone.
# If AGENTFS_TEST_DATABASE_URL or AGENTFS_TEST_S3_ENDPOINT is already set,
# that server is used instead of starting one. AGENTFS_TEST_KEEP=1 keeps
# the temporary directory (server data and logs) for inspection.
# AGENTFS_S3_SERVER=minio starts MinIO instead of versitygw (`make test-minio`).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

GO_TEST_ARGS=("$@")
if ((${#GO_TEST_ARGS[@]} == 0)); then
	GO_TEST_ARGS=(./...)
fi

start_pg=1
start_s3=1
[[ -n "${AGENTFS_TEST_DATABASE_URL:-}" ]] && start_pg=0
[[ -n "${AGENTFS_TEST_S3_ENDPOINT:-}" ]] && start_s3=0

run_python=1
[[ "${AGENTFS_TEST_PYTHON:-1}" == 0 ]] && run_python=0
run_readme=$run_python
(($# == 0)) || run_readme=0
[[ "${AGENTFS_TEST_README:-1}" == 0 ]] && run_readme=0

deps=()
((start_pg)) && deps+=(pg)
((start_s3)) && deps+=(s3)
((run_python)) && deps+=(python)
# The official MCP clients (cmd/agentfs TestOfficialMCPClients): Node 24 and
# the pinned npm tools of tools/node; ensure_deps exports NODE24 and
# NODE_TOOLS_DIR.
deps+=(node npm)
if ((${#deps[@]} > 0)); then
	ensure_deps "${deps[@]}"
fi

TEST_TMP=""
pg_dir=""
s3_dir=""

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	set +e
	[[ -n "$s3_dir" ]] && s3_stop "$s3_dir"
	[[ -n "$pg_dir" ]] && pg_stop "$pg_dir"
	if [[ -n "$TEST_TMP" ]]; then
		if [[ "${AGENTFS_TEST_KEEP:-}" == 1 ]]; then
			log "kept $TEST_TMP (AGENTFS_TEST_KEEP=1)"
		else
			rm -rf "$TEST_TMP"
		fi
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/agentfs-test.XXXXXX")
chmod 755 "$TEST_TMP"
LOG_DIR=$TEST_TMP/log
mkdir -p "$LOG_DIR"

pg_where=""
s3_where=""
used_ports=()

if ((start_pg)); then
	pg_dir=$TEST_TMP/pg
	# A free port can be taken by someone else before Postgres binds it:
	# then try another.
	for attempt in 1 2 3; do
		pg_port=$(free_port)
		pg_start "$pg_dir" "$pg_port" test && break
		((attempt < 3)) || die "Postgres did not start"
		log "Postgres could not start on port $pg_port; trying another port"
	done
	used_ports+=("$pg_port")
	export AGENTFS_TEST_DATABASE_URL="postgres://agentfs@127.0.0.1:$pg_port/agentfs?sslmode=disable"
	pg_where="postgres 127.0.0.1:$pg_port (throwaway)"
else
	export AGENTFS_TEST_DATABASE_URL
	pg_where="postgres from AGENTFS_TEST_DATABASE_URL"
fi

if ((start_s3)); then
	s3_dir=$TEST_TMP/s3
	export AGENTFS_TEST_S3_ACCESS_KEY="agentfs-test"
	export AGENTFS_TEST_S3_SECRET_KEY="agentfs-test-secret"
	for attempt in 1 2 3; do
		s3_port=$(free_port "${used_ports[@]}")
		s3_start "$s3_dir" "$s3_port" "$AGENTFS_TEST_S3_ACCESS_KEY" "$AGENTFS_TEST_S3_SECRET_KEY" && break
		((attempt < 3)) || die "$S3_SERVER did not start"
		log "$S3_SERVER could not start on port $s3_port; trying another port"
	done
	export AGENTFS_TEST_S3_ENDPOINT="127.0.0.1:$s3_port"
	export AGENTFS_TEST_S3_USE_SSL=false
	export AGENTFS_TEST_S3_REGION=us-east-1
	s3_where="$S3_SERVER 127.0.0.1:$s3_port (throwaway)"
else
	export AGENTFS_TEST_S3_ENDPOINT
	if [[ -z "${AGENTFS_TEST_S3_ACCESS_KEY:-}" || -z "${AGENTFS_TEST_S3_SECRET_KEY:-}" ]]; then
		log "warning: AGENTFS_TEST_S3_ENDPOINT is set but AGENTFS_TEST_S3_ACCESS_KEY/SECRET_KEY are not"
	fi
	export AGENTFS_TEST_S3_ACCESS_KEY="${AGENTFS_TEST_S3_ACCESS_KEY:-}"
	export AGENTFS_TEST_S3_SECRET_KEY="${AGENTFS_TEST_S3_SECRET_KEY:-}"
	s3_where="S3 at $AGENTFS_TEST_S3_ENDPOINT (from AGENTFS_TEST_S3_ENDPOINT)"
fi

export NODE24 NODE_TOOLS_DIR
echo "test servers: $pg_where; $s3_where; logs in $LOG_DIR"

set +e
go test -race -count=1 -timeout 9m "${GO_TEST_ARGS[@]}"
status=$?
set -e

if ((run_python)); then
	echo "==> Python SDK tests (sdk/python)"
	python_sdk_venv "$TEST_TMP/py-venv"
	set +e
	(cd sdk/python && PYTHONDONTWRITEBYTECODE=1 "$TEST_TMP/py-venv/bin/python" -m pytest -q \
		--basetemp "$TEST_TMP/pytest" tests)
	py_status=$?
	set -e
	if ((py_status != 0)); then
		log "Python SDK tests failed (status $py_status)"
		((status != 0)) || status=$py_status
	fi
fi

if ((run_readme)); then
	echo "==> README.md's examples, in order, against a fresh make run"
	set +e
	README_CHECK_PYTHON="$TEST_TMP/py-venv/bin/python" scripts/readme-check.sh README.md
	readme_status=$?
	set -e
	if ((readme_status != 0)); then
		log "README check failed (status $readme_status)"
		((status != 0)) || status=$readme_status
	fi
fi
exit "$status"
