#!/usr/bin/env bash
#
# make scale-test (DESIGN §24, docs/scaling.md): the scale-out story on one
# machine, under faults.
#
#   three `agentfs serve` behind HAProxy (Debian haproxy),
#   MinIO distributed: 4 server processes with 2 drives each, one erasure
#     set (bin/minio, as make test-minio builds it), behind the same HAProxy,
#   Postgres primary + synchronous standby under pg_auto_failover (Debian
#     postgresql-15-auto-failover), which the API reaches on a multi-host URL
#     with target_session_attrs=read-write.
#
# bench/scale (cmd: bin/scaletest) puts a steady mixed load through HAProxy
# (keyed uploads, replaces, batches, uploads in parts, event followers) and,
# on its schedule, runs the faults this script hands it: SIGKILL of an API
# instance, SIGKILL of a MinIO node, SIGKILL of the Postgres primary (its
# pg_autoctl keeper and its postmaster, so the monitor fails over to the
# standby). Then it checks and prints the table of §24.
#
# Every process is started here with its pid in $SCALE_TMP/pids and stopped
# through those files (other Postgres and MinIO processes may run on the
# machine; nothing is stopped by name). Traffic stays on 127.0.0.1.
#
# SCALE_SECONDS (default 150) is the length of the load; faults come at 20%,
# 40% and 60% of it. SCALE_KEEP=1 keeps the temporary directory (logs).
set -euo pipefail

export AGENTFS_S3_SERVER=minio
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

SCALE_SECONDS=${SCALE_SECONDS:-150}
[[ "$SCALE_SECONDS" =~ ^[0-9]+$ ]] && ((SCALE_SECONDS >= 30 && SCALE_SECONDS <= 600)) ||
	die "SCALE_SECONDS must be a whole number of seconds from 30 to 600, not $SCALE_SECONDS"

ensure_deps pg s3 haproxy autofailover
PGBIN=$(pg_bindir)

SCALE_TMP=$(make_tmp scale)
LOG_DIR=$SCALE_TMP/log
PIDS=$SCALE_TMP/pids
mkdir -p "$PIDS"
# Start order, so that cleanup stops in reverse: load balancer and API first.
STARTED=()

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$? i name pid pgdata
	trap - EXIT INT TERM
	set +e
	for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
		name=${STARTED[i]}
		pid=$(cat "$PIDS/$name.pid" 2>/dev/null)
		[[ "$pid" =~ ^[0-9]+$ ]] && stop_pid "$pid" "" 20
	done
	# pg_autoctl stops its Postgres when it stops; a postmaster left over
	# (its keeper was killed) is stopped through its own pid file.
	for pgdata in "$SCALE_TMP"/pg/node1 "$SCALE_TMP"/pg/node2 "$SCALE_TMP"/pg/monitor; do
		pid=$(head -n 1 "$pgdata/postmaster.pid" 2>/dev/null)
		[[ "$pid" =~ ^[0-9]+$ ]] && _pid_alive "$pid" postgres && stop_pid "$pid" postgres 20
	done
	if ((status != 0)); then
		log "scale-test failed; logs are in $SCALE_TMP/log"
		SCALE_KEEP=1
	fi
	remove_tmp "$SCALE_TMP" SCALE_KEEP
	exit "$status"
}
trap_cleanup

# start NAME [env NAME=VALUE...] COMMAND...: run COMMAND in a session of its
# own with its output in log/NAME.log and its pid (the pid of COMMAND itself:
# the launcher execs) in pids/NAME.pid.
start() {
	local name=$1
	shift
	# shellcheck disable=SC2016 # $$ and $@ are for the inner shell
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' launch "$PIDS/$name.pid" "$@" \
		</dev/null >>"$LOG_DIR/$name.log" 2>&1 &
	# The faults kill some of them: no job notices from this shell.
	disown $!
	STARTED+=("$name")
	local i
	for ((i = 0; i < 50; i++)); do
		[[ -s "$PIDS/$name.pid" ]] && return 0
		sleep 0.02
	done
	die "$name did not start"
}

# wait_for WHAT SECONDS COMMAND...: run COMMAND until it succeeds.
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 4; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	log "error: $what not ready after ${secs}s"
	return 1
}

now_ms() { printf '%s\n' "$((${EPOCHREALTIME/./} / 1000))"; }
T0=$(now_ms)
step() { printf '[%6.1fs] %s\n' "$(($(now_ms) - T0))e-3" "$*"; }

# ---- Postgres: monitor, primary, synchronous standby (pg_auto_failover) ----
PG=$SCALE_TMP/pg
mkdir -p "$PG"
chown postgres:postgres "$PG"
# as_pg COMMAND...: run as postgres with pg_autoctl's XDG folders in the test
# folder (setpriv execs, so a started keeper's pid is the pid recorded).
AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups
	env HOME="$PG" XDG_CONFIG_HOME="$PG/xdg/config" XDG_DATA_HOME="$PG/xdg/data"
	XDG_RUNTIME_DIR="$PG/xdg/run" PATH="$PGBIN:$PATH")
as_pg() { "${AS_PG[@]}" "$@"; }
as_pg mkdir -p "$PG/xdg/config" "$PG/xdg/data" "$PG/xdg/run"

MONITOR_PORT=$(free_port)
NODE1_PORT=$(free_port "$MONITOR_PORT")
NODE2_PORT=$(free_port "$MONITOR_PORT" "$NODE1_PORT")
MONITOR_URL="postgres://autoctl_node@127.0.0.1:$MONITOR_PORT/pg_auto_failover?sslmode=disable"

# pg_autoctl sets shared_buffers to a quarter of RAM on every node; a line
# after its include keeps the test's small.
small_pg() {
	printf "\n# make scale-test\nshared_buffers = '128MB'\nmax_connections = 300\n" |
		as_pg tee -a "$1/postgresql.conf" >/dev/null
}

step "pg_auto_failover: monitor on $MONITOR_PORT"
as_pg pg_autoctl create monitor --pgdata "$PG/monitor" --pgport "$MONITOR_PORT" \
	--hostname 127.0.0.1 --auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" >>"$LOG_DIR/pg-create.log" 2>&1 ||
	{ _tail_log "$LOG_DIR/pg-create.log"; die "pg_autoctl create monitor failed"; }
as_pg pg_autoctl config set --pgdata "$PG/monitor" postgresql.listen_addresses 127.0.0.1 >>"$LOG_DIR/pg-create.log" 2>&1
small_pg "$PG/monitor"
start monitor "${AS_PG[@]}" pg_autoctl run --pgdata "$PG/monitor"
mpsql() { psql -X -q -h 127.0.0.1 -p "$MONITOR_PORT" -U autoctl_node -d pg_auto_failover -tA "$@"; }
wait_for "the monitor" 60 mpsql -c 'select 1'
# Fail over in seconds, not the default minute.
for setting in health_check_period=1000 health_check_timeout=1000 health_check_retry_delay=500 \
	health_check_max_retries=1 node_considered_unhealthy_timeout=3000 primary_demote_timeout=5000; do
	psql -X -q -h 127.0.0.1 -p "$MONITOR_PORT" -U postgres -d pg_auto_failover \
		-c "alter system set pgautofailover.${setting%%=*} = ${setting#*=}" >>"$LOG_DIR/pg-create.log" 2>&1 ||
		die "could not set pgautofailover.$setting on the monitor"
done
psql -X -q -h 127.0.0.1 -p "$MONITOR_PORT" -U postgres -d pg_auto_failover -c 'select pg_reload_conf()' >/dev/null

# node N PORT: create data node N and run its keeper.
node() {
	local n=$1 port=$2
	as_pg pg_autoctl create postgres --pgdata "$PG/node$n" --pgport "$port" --listen 127.0.0.1 \
		--hostname 127.0.0.1 --name "node$n" --monitor "$MONITOR_URL" --auth trust --no-ssl \
		--dbname agentfs --pgctl "$PGBIN/pg_ctl" >>"$LOG_DIR/pg-create.log" 2>&1 ||
		{ _tail_log "$LOG_DIR/pg-create.log"; die "pg_autoctl create postgres node$n failed"; }
	as_pg pg_autoctl config set --pgdata "$PG/node$n" timeout.network_partition_timeout 4 >>"$LOG_DIR/pg-create.log" 2>&1
	[[ -f "$PG/node$n/postgresql.conf" ]] && small_pg "$PG/node$n"
	start "node$n" "${AS_PG[@]}" pg_autoctl run --pgdata "$PG/node$n"
}
# states: the node states the monitor reports, "name:state ...".
states() { mpsql -c "select string_agg(nodename || ':' || reportedstate, ' ' order by nodeid) from pgautofailover.node"; }
state_is() { [[ "$(states)" == "$1" ]]; }

step "pg_auto_failover: primary on $NODE1_PORT"
node 1 "$NODE1_PORT"
wait_for "the primary" 90 state_is "node1:single"
step "pg_auto_failover: synchronous standby on $NODE2_PORT"
node 2 "$NODE2_PORT"
wait_for "the standby" 120 state_is "node1:primary node2:secondary" || die "states: $(states)"
psql -X -q -h 127.0.0.1 -p "$NODE1_PORT" -U postgres -d agentfs \
	-c "create role agentfs login superuser" -c "alter database agentfs owner to agentfs" >>"$LOG_DIR/pg-create.log" 2>&1 ||
	die "could not create role agentfs on the primary"
step "Postgres: $(states); synchronous_standby_names=$(psql -X -h 127.0.0.1 -p "$NODE1_PORT" -U postgres -tAc 'show synchronous_standby_names')"
DB_URL="postgres://agentfs@127.0.0.1:$NODE1_PORT,127.0.0.1:$NODE2_PORT/agentfs?sslmode=disable&target_session_attrs=read-write&connect_timeout=3"

# ---- MinIO: 4 processes x 2 drives, one erasure set ----
MINIO_PORTS=()
for n in 1 2 3 4; do
	MINIO_PORTS+=("$(free_port "$MONITOR_PORT" "$NODE1_PORT" "$NODE2_PORT" "${MINIO_PORTS[@]}")")
done
ENDPOINTS=()
for n in 1 2 3 4; do
	for d in 1 2; do
		mkdir -p "$SCALE_TMP/minio/n$n/d$d"
		ENDPOINTS+=("http://127.0.0.1:${MINIO_PORTS[n - 1]}$SCALE_TMP/minio/n$n/d$d")
	done
done
S3_ACCESS=scaleaccess
S3_SECRET=scalesecret-$RANDOM$RANDOM
step "MinIO: 4 nodes on ${MINIO_PORTS[*]}"
for n in 1 2 3 4; do
	port=${MINIO_PORTS[n - 1]}
	# _MINIO_SERVER_LOCAL: in a container (/.dockerenv) MinIO cannot tell
	# which 127.0.0.1 endpoints are its own without it.
	# MINIO_CI_CD: the drives are folders on the root file system, which
	# MinIO otherwise refuses.
	start "minio$n" env MINIO_ROOT_USER=$S3_ACCESS MINIO_ROOT_PASSWORD="$S3_SECRET" MINIO_BROWSER=off MINIO_CI_CD=1 \
		_MINIO_SERVER_LOCAL="127.0.0.1:$port" \
		"$MINIO_BIN" server --quiet --address "127.0.0.1:$port" "${ENDPOINTS[@]}"
done
for port in "${MINIO_PORTS[@]}"; do
	wait_for "MinIO on $port" 90 curl -sf -o /dev/null -m 2 "http://127.0.0.1:$port/minio/health/cluster"
done

# ---- HAProxy in front of the API instances and the MinIO nodes ----
API_PORTS=()
taken=("$MONITOR_PORT" "$NODE1_PORT" "$NODE2_PORT" "${MINIO_PORTS[@]}")
for n in 1 2 3; do
	API_PORTS+=("$(free_port "${taken[@]}" "${API_PORTS[@]}")")
done
taken+=("${API_PORTS[@]}")
LB_PORT=$(free_port "${taken[@]}")
S3LB_PORT=$(free_port "${taken[@]}" "$LB_PORT")
{
	cat <<EOF
global
  maxconn 4000
defaults
  mode http
  timeout connect 1s
  timeout client 120s
  timeout server 120s
  timeout http-request 30s
  retries 2
  option redispatch
  retry-on conn-failure empty-response response-timeout
frontend api
  bind 127.0.0.1:$LB_PORT
  default_backend agentfs
backend agentfs
  balance roundrobin
  option httpchk GET /readyz
  default-server inter 500ms fall 2 rise 2
EOF
	for n in 1 2 3; do
		printf '  server api%d 127.0.0.1:%d check\n' "$n" "${API_PORTS[n - 1]}"
	done
	cat <<EOF
frontend s3
  bind 127.0.0.1:$S3LB_PORT
  default_backend minio
backend minio
  balance leastconn
  option httpchk GET /minio/health/live
  default-server inter 500ms fall 2 rise 2
EOF
	for n in 1 2 3 4; do
		printf '  server minio%d 127.0.0.1:%d check\n' "$n" "${MINIO_PORTS[n - 1]}"
	done
} >"$SCALE_TMP/haproxy.cfg"

# ---- AgentFS ----
step "building bin/agentfs and bin/scaletest"
go build -o bin/agentfs ./cmd/agentfs
go build -o bin/scaletest ./bench/scale

export AGENTFS_DATABASE_URL=$DB_URL
export AGENTFS_S3_ENDPOINT=127.0.0.1:$S3LB_PORT
export AGENTFS_S3_ACCESS_KEY=$S3_ACCESS AGENTFS_S3_SECRET_KEY=$S3_SECRET
AGENTFS_RECORD_KEY=$(head -c 32 /dev/urandom | base64)
export AGENTFS_RECORD_KEY
# Every client comes through the one proxy address: per-address and
# per-instance limits would meter the test's own load.
export AGENTFS_RATE_LIMIT=0 AGENTFS_AUTH_FAILURE_LIMIT=0
# Parts of the smallest size S3 takes, so an upload in parts stays small.
export AGENTFS_UPLOAD_PART_SIZE=5242880
# A dead instance's claims and batches are taken over after these.
export AGENTFS_IDEMPOTENCY_LEASE=${AGENTFS_IDEMPOTENCY_LEASE:-10s}
export AGENTFS_BATCH_RESCUE_AFTER=${AGENTFS_BATCH_RESCUE_AFTER:-10s}
export AGENTFS_UPLOAD_COMPLETE_LEASE=${AGENTFS_UPLOAD_COMPLETE_LEASE:-10s}
export AGENTFS_DB_TIMEOUT=${AGENTFS_DB_TIMEOUT:-5s}
export AGENTFS_S3_TIMEOUT=${AGENTFS_S3_TIMEOUT:-10s}
export AGENTFS_WRITE_IDLE_TIMEOUT=30s
export AGENTFS_LOG_LEVEL=${AGENTFS_LOG_LEVEL:-warn}

step "S3 behind HAProxy on $S3LB_PORT, API behind it on $LB_PORT (instances on ${API_PORTS[*]})"
# HAProxy first for S3 (agentfs migrate creates the bucket through it); its
# API backends are marked up by their checks once they listen.
start haproxy "$HAPROXY_BIN" -W -db -f "$SCALE_TMP/haproxy.cfg"
wait_for "HAProxy" 30 curl -sf -o /dev/null -m 2 "http://127.0.0.1:$S3LB_PORT/minio/health/live"
bin/agentfs migrate >>"$LOG_DIR/migrate.log" 2>&1 || { _tail_log "$LOG_DIR/migrate.log"; die "agentfs migrate failed"; }
for n in 1 2 3; do
	start "api$n" env AGENTFS_LISTEN_ADDR="127.0.0.1:${API_PORTS[n - 1]}" \
		AGENTFS_PUBLIC_URL="http://127.0.0.1:$LB_PORT" bin/agentfs serve
done
for n in 1 2 3; do
	wait_for "agentfs api$n" 60 curl -sf -o /dev/null -m 2 "http://127.0.0.1:${API_PORTS[n - 1]}/readyz" ||
		{ _tail_log "$LOG_DIR/api$n.log"; die "api$n did not start"; }
done
wait_for "the API through HAProxy" 30 curl -sf -o /dev/null -m 2 "http://127.0.0.1:$LB_PORT/readyz"
TOKEN=$(bin/agentfs admin token create --subject scale-test --scopes read,write 2>>"$LOG_DIR/migrate.log")

# The faults, as commands run by bin/scaletest at their time.
FAULT_API="kill -KILL \$(cat '$PIDS/api2.pid')"
FAULT_S3="kill -KILL \$(cat '$PIDS/minio4.pid')"
# The primary's keeper first (it would restart its Postgres), then the
# postmaster: a dead primary machine, as the monitor sees it.
FAULT_PG="kill -KILL \$(cat '$PIDS/node1.pid') && kill -KILL \$(head -n 1 '$PG/node1/postmaster.pid')"

step "load for ${SCALE_SECONDS}s through HAProxy; faults at 20%, 40% and 60% of it"
set +e
bin/scaletest -url "http://127.0.0.1:$LB_PORT" -token "$TOKEN" -duration "${SCALE_SECONDS}s" \
	-database-url "$DB_URL" -s3-endpoint "127.0.0.1:$S3LB_PORT" -s3-access-key "$S3_ACCESS" \
	-s3-secret-key "$S3_SECRET" -bucket "${AGENTFS_S3_BUCKET:-agentfs}" \
	-fault "SIGKILL API instance 2=$FAULT_API" \
	-fault "SIGKILL MinIO node 4=$FAULT_S3" \
	-fault "Postgres failover (SIGKILL primary)=$FAULT_PG" \
	-fault-check "Postgres failover (SIGKILL primary)=psql -X -h 127.0.0.1 -p $MONITOR_PORT -U autoctl_node -d pg_auto_failover -tAc \"select string_agg(nodename || ':' || reportedstate, ' ' order by nodeid) from pgautofailover.node\"" \
	-api-pids "$PIDS/api1.pid,$PIDS/api2.pid,$PIDS/api3.pid" \
	-pg-pids "$PG/node1/postmaster.pid,$PG/node2/postmaster.pid" \
	-proxy-pids "$PIDS/haproxy.pid" \
	-s3-pids "$PIDS/minio1.pid,$PIDS/minio2.pid,$PIDS/minio3.pid,$PIDS/minio4.pid" \
	2> >(tee -a "$LOG_DIR/scaletest.log" >&2)
result=$?
set -e
step "Postgres after the run: $(states)"
printf 'load average (uptime):%s\n' "$(uptime | sed 's/.*load average://')"
# What the instances logged at warn and above (AGENTFS_LOG_LEVEL=warn).
for n in 1 2 3; do
	printf 'api%d logged %d lines (warn and above)%s\n' "$n" "$(wc -l <"$LOG_DIR/api$n.log")" \
		"$( ((n == 2)) && printf ' before its SIGKILL')"
	grep -m 3 -E 'level=(WARN|ERROR)|panic' "$LOG_DIR/api$n.log" | cut -c 1-300 | sed 's/^/    /'
done
exit "$result"
