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
# Ory Hydra (the OAuth authorization server of the OAuth tests) is built if
# missing and started on the test Postgres, in a database of its own, in the
# background while go test compiles; it exports AGENTFS_TEST_HYDRA_PUBLIC_URL
# and AGENTFS_TEST_HYDRA_ADMIN_URL (set both to use a running Hydra instead),
# and AGENTFS_TEST_NODE and AGENTFS_TEST_NODE_TOOLS for the tests that drive
# the MCP TypeScript SDK (tools/node). AGENTFS_TEST_HYDRA=0 starts no Hydra
# (for packages without OAuth tests; those tests then fail saying so).
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

# ripgrep: the content search test compares every answer with rg -n (RG_BIN).
# fuse3 and rsync: the mount tests (mount/) mount with fusermount3 and run
# real programs in the mount, rsync among them.
deps=(rg fuse rsync)
((start_pg)) && deps+=(pg)
((start_s3)) && deps+=(s3)
((run_python)) && deps+=(python)
# The official MCP clients (cmd/agentfs TestOfficialMCPClients): Node 24 and
# the pinned npm tools of tools/node; ensure_deps exports NODE24 and
# NODE_TOOLS_DIR.
deps+=(node npm)
# The console in a real browser (console TestConsoleInABrowser): Debian's
# chromium, driven by tools/node's playwright-core; ensure_deps exports
# CHROMIUM_BIN, which tools/node/chromium.mjs launches.
deps+=(chromium)
# The event stream behind a load balancer (handlers
# TestEventStreamBehindHAProxy): Debian's haproxy; ensure_deps exports
# HAPROXY_BIN.
deps+=(haproxy)
start_hydra=1
[[ -n "${AGENTFS_TEST_HYDRA_PUBLIC_URL:-}" && -n "${AGENTFS_TEST_HYDRA_ADMIN_URL:-}" ]] && start_hydra=0
[[ "${AGENTFS_TEST_HYDRA:-1}" == 0 ]] && start_hydra=0
ensure_deps "${deps[@]}"

TEST_TMP=""
pg_dir=""
s3_dir=""
hydra_dir=""
hydra_db=""
hydra_job=""

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	set +e
	if [[ -n "$hydra_job" ]]; then
		wait "$hydra_job" 2>/dev/null
	fi
	[[ -n "$hydra_dir" ]] && hydra_stop "$hydra_dir"
	# A database of this run on a Postgres that outlives it.
	[[ -n "$hydra_db" ]] && psql -X -q "$AGENTFS_TEST_DATABASE_URL" -c "drop database if exists $hydra_db" >/dev/null 2>&1
	[[ -n "$s3_dir" ]] && s3_stop "$s3_dir"
	[[ -n "$pg_dir" ]] && pg_stop "$pg_dir"
	remove_tmp "$TEST_TMP" AGENTFS_TEST_KEEP
	exit "$status"
}
trap_cleanup

TEST_TMP=$(make_tmp test)
LOG_DIR=$TEST_TMP/log

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

export AGENTFS_TEST_NODE=$NODE24 AGENTFS_TEST_NODE_TOOLS=$NODE_TOOLS_DIR CHROMIUM_BIN

hydra_where="Hydra from AGENTFS_TEST_HYDRA_PUBLIC_URL"
if ((start_hydra)); then
	hydra_dir=$TEST_TMP/hydra
	hydra_name=hydra_$(basename "$TEST_TMP" | tr -c 'a-zA-Z0-9\n' _ | tr 'A-Z' 'a-z')
	((start_pg)) || hydra_db=$hydra_name
	hydra_pub=$(free_port "${used_ports[@]}")
	hydra_adm=$(free_port "${used_ports[@]}" "$hydra_pub")
	export AGENTFS_TEST_HYDRA_PUBLIC_URL="http://127.0.0.1:$hydra_pub"
	export AGENTFS_TEST_HYDRA_ADMIN_URL="http://127.0.0.1:$hydra_adm"
	# Built (the first time) and started while go test compiles; the
	# tests wait for it (oauthtest.NewHydra). The login and consent URLs
	# are never fetched: the tests read the challenges from Hydra's
	# redirects and accept them through its admin API.
	(
		ensure_deps hydra
		dsn=$(pg_create_database "$AGENTFS_TEST_DATABASE_URL" "$hydra_name")
		URLS_LOGIN=http://127.0.0.1:9/login URLS_CONSENT=http://127.0.0.1:9/consent \
			hydra_start "$hydra_dir" "$hydra_pub" "$hydra_adm" "$dsn"
	) >"$LOG_DIR/hydra-start.log" 2>&1 &
	hydra_job=$!
	hydra_where="hydra 127.0.0.1:$hydra_pub (throwaway, starting; log in $LOG_DIR/hydra-start.log)"
fi

echo "test servers: $pg_where; $s3_where; $hydra_where; logs in $LOG_DIR"

set +e
# The timeout catches a hung test; it is not a speed budget. A package of
# the larger ones (handlers, mcpserver, cmd/agentfs) takes several minutes
# under -race on two cores and more when the cores are shared, so 9m cut
# healthy runs short.
go test -race -count=1 -timeout 20m "${GO_TEST_ARGS[@]}"
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
