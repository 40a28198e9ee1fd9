#!/usr/bin/env bash
#
# Measure AgentFS against direct minio-go on throwaway servers (the performance budgets).
#
#   scripts/bench.sh                       # full sizes (a few minutes)
#   BENCH_QUICK=1 scripts/bench.sh         # small sizes, about a minute
#   scripts/bench.sh -only upload,download # extra arguments go to the bench program
#
#   scripts/bench.sh -h                    # the flags and measurements (starts nothing)
#
# Starts Postgres and versitygw (S3; AGENTFS_S3_SERVER=minio for MinIO) on free ports in a temporary directory,
# builds bin/agentfs, migrates, creates a token, starts `agentfs serve` on a
# free port, runs `go run ./bench` against it and stops everything again.
# All traffic stays on 127.0.0.1. Postgres runs as in make test (fsync off):
# versitygw does not fsync either, so neither store pays for durability the
# other skips; it also records commit timestamps (track_commit_timestamp),
# from which the event delivery measurement takes each event's commit
# instant. The per-subject rate limit and byte quota are turned off, and the
# batch body limit is raised so that 1000 items of 64 KiB fit in one batch.
# BENCH_KEEP=1 keeps the temporary directory (data and logs).
# BENCH_PG_STATEMENTS=1 loads pg_stat_statements (tracking statements inside
# functions and triggers too) and prints the statements that took the most
# of Postgres's time over the run, with calls and time per call: where the
# Postgres CPU rows' time goes.
# BENCH_PG_EXPLAIN=MS loads auto_explain and logs, with EXPLAIN ANALYZE, every
# statement (also one inside a function) that ran MS milliseconds or more, to
# the kept Postgres log (implies BENCH_KEEP=1): the plans behind those times.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

BENCH_ARGS=("$@")

# Help needs no servers.
for arg in "${BENCH_ARGS[@]}"; do
	case "$arg" in
	-h | -help | --help)
		exec go run ./bench -h
		;;
	esac
done

# node npm: Node 24 and tools/node, for the peers that run under Node (the
# turso line's agentfs-sdk among them).
ensure_deps pg s3 rg fuse rclone node npm

BENCH_TMP=""
pg_dir=""
s3_dir=""
agentfs_pid=""
noindex_pid=""
nocache_pid=""
pg_pid=""
s3_pid=""

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	set +e
	[[ -n "$agentfs_pid" ]] && stop_pid "$agentfs_pid" agentfs 20
	[[ -n "$noindex_pid" ]] && stop_pid "$noindex_pid" agentfs 20
	[[ -n "$nocache_pid" ]] && stop_pid "$nocache_pid" agentfs 20
	[[ -n "$s3_dir" ]] && s3_stop "$s3_dir"
	[[ -n "$pg_dir" ]] && pg_stop "$pg_dir"
	# The helpers find the servers through files in the temporary
	# directory; should it have gone meanwhile, stop them by pid.
	[[ -n "$s3_pid" ]] && stop_pid "$s3_pid" "$S3_SERVER" 15
	[[ -n "$pg_pid" ]] && stop_pid "$pg_pid" postgres 30
	remove_tmp "$BENCH_TMP" BENCH_KEEP
	exit "$status"
}
trap_cleanup

BENCH_TMP=$(make_tmp bench)
LOG_DIR=$BENCH_TMP/log

log "building bin/agentfs ..."
go build -o bin/agentfs ./cmd/agentfs

# A free port can be taken by someone else before the server binds it, so
# each start gets three tries on fresh ports (in a subshell, since the
# helpers exit on some failures).
pg_dir=$BENCH_TMP/pg
pg_port=""
for attempt in 1 2 3; do
	pg_port=$(free_port)
	if (pg_start "$pg_dir" "$pg_port" test); then
		break
	fi
	((attempt < 3)) || die "could not start Postgres"
	log "retrying Postgres on another port ..."
done

# Commit timestamps are a server setting: set it, then start again.
psql -X -q -h 127.0.0.1 -p "$pg_port" -U agentfs -d postgres \
	-c 'ALTER SYSTEM SET track_commit_timestamp = on' >/dev/null ||
	die "could not turn on track_commit_timestamp"
preload=()
[[ "${BENCH_PG_STATEMENTS:-}" == 1 ]] && preload+=(pg_stat_statements)
if [[ -n "${BENCH_PG_EXPLAIN:-}" ]]; then
	[[ "$BENCH_PG_EXPLAIN" =~ ^[0-9]+$ ]] || die "BENCH_PG_EXPLAIN takes a whole number of milliseconds, not '$BENCH_PG_EXPLAIN'"
	preload+=(auto_explain)
	BENCH_KEEP=1
fi
if ((${#preload[@]})); then
	psql -X -q -h 127.0.0.1 -p "$pg_port" -U agentfs -d postgres \
		-c "ALTER SYSTEM SET shared_preload_libraries = '$(IFS=,; echo "${preload[*]}")'" >/dev/null ||
		die "could not load ${preload[*]}"
fi

pg_stop "$pg_dir"
(pg_start "$pg_dir" "$pg_port" test) || die "could not restart Postgres with track_commit_timestamp"
pg_pid=$(head -n 1 "$pg_dir/postmaster.pid" 2>/dev/null || true)

s3_dir=$BENCH_TMP/s3
s3_port=""
for attempt in 1 2 3; do
	s3_port=$(free_port "$pg_port")
	if (s3_start "$s3_dir" "$s3_port" agentfs-bench agentfs-bench-secret); then
		break
	fi
	((attempt < 3)) || die "could not start $S3_SERVER"
	log "retrying $S3_SERVER on another port ..."
done
s3_pid=$(cat "$LOG_DIR/$S3_SERVER.pid" 2>/dev/null || true)

export AGENTFS_DATABASE_URL="postgres://agentfs@127.0.0.1:$pg_port/agentfs?sslmode=disable"
export AGENTFS_S3_ENDPOINT="127.0.0.1:$s3_port"
export AGENTFS_S3_ACCESS_KEY=agentfs-bench
export AGENTFS_S3_SECRET_KEY=agentfs-bench-secret
export AGENTFS_S3_BUCKET=agentfs
export AGENTFS_S3_USE_SSL=false
export AGENTFS_S3_REGION=us-east-1
export AGENTFS_S3_PUBLIC_ENDPOINT="http://127.0.0.1:$s3_port" # the redirect line's presigned URLs
export AGENTFS_LOG_LEVEL=warn
export AGENTFS_WEBHOOK_ALLOW_PRIVATE=true # the webhook measurement's receiver listens on loopback
AGENTFS_RECORD_KEY=$(head -c 32 /dev/urandom | base64)
export AGENTFS_RECORD_KEY
# The benchmark measures throughput, not the per-subject limits.
export AGENTFS_RATE_LIMIT=0
export AGENTFS_QUOTA_BYTES=0
export AGENTFS_MAX_VERSIONS=100000 # the versions line seeds 10 k versions of one file
# 1000 items of 64 KiB are about 64 MiB of JSON (the default allows 32 MiB).
export AGENTFS_BATCH_MAX_BYTES=$((128 << 20))

bin/agentfs migrate
if [[ "${BENCH_PG_STATEMENTS:-}" == 1 ]]; then
	psql -X -q -h 127.0.0.1 -p "$pg_port" -U agentfs -d agentfs \
		-c "ALTER SYSTEM SET pg_stat_statements.track = 'all'" -c "ALTER SYSTEM SET pg_stat_statements.track_planning = on" \
		-c 'SELECT pg_reload_conf()' \
		-c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' -c 'SELECT pg_stat_statements_reset()' >/dev/null ||
		die "could not create the pg_stat_statements extension"
fi
if [[ -n "${BENCH_PG_EXPLAIN:-}" ]]; then
	psql -X -q -h 127.0.0.1 -p "$pg_port" -U agentfs -d postgres \
		-c "ALTER SYSTEM SET auto_explain.log_min_duration = '${BENCH_PG_EXPLAIN}ms'" \
		-c "ALTER SYSTEM SET auto_explain.log_analyze = on" \
		-c "ALTER SYSTEM SET auto_explain.log_nested_statements = on" -c 'SELECT pg_reload_conf()' >/dev/null ||
		die "could not set auto_explain up"
	log "auto_explain logs the plans of statements of ${BENCH_PG_EXPLAIN} ms or more to the Postgres log under $BENCH_TMP"
fi
token=$(bin/agentfs token create --subject bench | tail -n 1 | tr -d '[:space:]')
[[ -n "$token" ]] || die "bin/agentfs token create printed no token"

# start_agentfs NAME [VAR=VALUE ...]: start agentfs serve on a free port
# (with the extra settings given, logging to NAME.log) and wait for /readyz;
# it sets started_pid and started_url. Returns 1 when it exits during
# startup (a port taken meanwhile, say).
start_agentfs() {
	local name=$1 port code i url
	shift
	port=$(free_port "$pg_port" "$s3_port")
	url="http://127.0.0.1:$port"
	env "$@" AGENTFS_LISTEN_ADDR="127.0.0.1:$port" AGENTFS_PUBLIC_URL="$url" \
		bin/agentfs serve >>"$LOG_DIR/$name.log" 2>&1 &
	started_pid=$!
	started_url=$url
	for ((i = 0; i < SERVER_START_TIMEOUT * 10; i++)); do
		if ! _pid_alive "$started_pid"; then
			wait "$started_pid" 2>/dev/null || true
			started_pid=""
			_tail_log "$LOG_DIR/$name.log"
			return 1
		fi
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url/readyz" 2>/dev/null || true)
		if [[ "$code" == 200 ]]; then
			return 0
		fi
		sleep 0.1
	done
	_tail_log "$LOG_DIR/$name.log"
	die "agentfs serve ($name) was not ready on $url within ${SERVER_START_TIMEOUT}s"
}

# start_retrying NAME WHAT [VAR=VALUE...]: start_agentfs NAME with the
# variables, on another port up to three times; WHAT names the server in
# the messages.
start_retrying() {
	local name=$1 what=$2 attempt
	shift 2
	for attempt in 1 2 3; do
		if start_agentfs "$name" "$@"; then
			return 0
		fi
		((attempt < 3)) || die "$what exited during startup"
		log "retrying $what on another port ..."
	done
}

start_retrying agentfs "agentfs serve"
agentfs_pid=$started_pid
AGENTFS_PUBLIC_URL=$started_url

# A second server on the same Postgres and S3 that indexes nothing for
# search: the indexcost measurement uploads to both.
# (AGENTFS_PPROF_ADDR, if set, is the main server's alone: one address, one process)
start_retrying agentfs-noindex "agentfs serve (no search index)" AGENTFS_SEARCH_MAX_FILE_BYTES=0 AGENTFS_PPROF_ADDR=
noindex_pid=$started_pid
noindex_url=$started_url

# A third without the blob cache: the turso measurement reads the same
# files through it, the "before" of the cache in the same run.
start_retrying agentfs-nocache "agentfs serve (no blob cache)" AGENTFS_BLOB_CACHE_BYTES=0 AGENTFS_PPROF_ADDR=
nocache_pid=$started_pid
nocache_url=$started_url

echo "bench servers: AgentFS $AGENTFS_PUBLIC_URL (pid $agentfs_pid; without the search index $noindex_url, pid $noindex_pid; without the blob cache $nocache_url, pid $nocache_pid), postgres 127.0.0.1:$pg_port, $S3_SERVER 127.0.0.1:$s3_port; logs in $LOG_DIR" >&2

set +e
AGENTFS_URL=$AGENTFS_PUBLIC_URL AGENTFS_TOKEN=$token BENCH_NOINDEX_URL=$noindex_url BENCH_NOCACHE_URL=$nocache_url \
	BENCH_SERVER_PID=$agentfs_pid BENCH_S3_PID=$s3_pid BENCH_S3_NAME=$S3_SERVER BENCH_PG_PID=$pg_pid \
	go run ./bench "${BENCH_ARGS[@]}"
status=$?
set -e
if [[ "${BENCH_PG_STATEMENTS:-}" == 1 ]]; then
	echo
	echo "Postgres statements by total time over the run (pg_stat_statements, top 25; nested statements counted in their callers too):"
	psql -X -q -h 127.0.0.1 -p "$pg_port" -U agentfs -d agentfs -P pager=off -c "
		SELECT round(total_exec_time::numeric, 0) AS exec_ms, round(total_plan_time::numeric, 0) AS plan_ms, calls,
			round((total_exec_time / greatest(calls, 1))::numeric, 3) AS exec_per_call,
			round((total_plan_time / greatest(calls, 1))::numeric, 3) AS plan_per_call, rows, toplevel AS top,
			left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS statement
		FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 25" | tee "$LOG_DIR/pg_stat_statements.txt"
fi
if ! _pid_alive "$agentfs_pid"; then
	log "error: agentfs serve is no longer running"
	_tail_log "$LOG_DIR/agentfs.log"
	status=1
fi
if ! _pid_alive "$noindex_pid"; then
	log "error: agentfs serve (no search index) is no longer running"
	_tail_log "$LOG_DIR/agentfs-noindex.log"
	status=1
fi
exit "$status"
