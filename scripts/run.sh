#!/usr/bin/env bash
#
# Run AgentFS locally with a development Postgres and versitygw (S3), or
# MinIO with AGENTFS_S3_SERVER=minio.
#
# Data lives in .data/ (pg, s3 and s3-sidecar for versitygw, minio for MinIO,
# log, record.key) and is reused by the next run. Ctrl-C stops everything it started.
#
# One dev token (subject "dev") is made once and kept in .data/dev-token; a
# later run reuses it while the database still accepts it. .data/agentfs.env
# holds it with the servers' addresses: `source .data/agentfs.env` in another
# shell sets up the client verbs, and `bin/agentfs token create --subject NAME`
# then makes more tokens against the same database.
#
# Environment (all optional):
#   AGENTFS_DEV_DATA_DIR  where the data lives (default .data)
#   AGENTFS_DEV_PG_PORT   Postgres port (default 54329)
#   AGENTFS_DEV_S3_PORT   S3 server port (default 7070)
#   AGENTFS_DEV_OAUTH=1   also start Ory Hydra (built into bin/ the first time)
#                         on the same Postgres, in its own database, and
#                         take its JWT access tokens (AGENTFS_OAUTH_ISSUER);
#                         prints a client id and secret and the curl line
#                         that gets a token. Its data stays in .data/hydra
#                         and .data/hydra-client.json
#   AGENTFS_DEV_HYDRA_PORT Hydra's public port (default 4444; admin: +1)
#   AGENTFS_*             passed to agentfs as set; defaults are filled in
#                         for the local servers. When AGENTFS_DATABASE_URL or
#                         AGENTFS_S3_ENDPOINT is set, that server is used and
#                         the local one is not started.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

DATA_DIR=$(_abspath "${AGENTFS_DEV_DATA_DIR:-$REPO_ROOT/.data}")
LOG_DIR=$DATA_DIR/log
PG_DIR=$DATA_DIR/pg
S3_DIR=$DATA_DIR/s3 # versitygw keeps its metadata in $S3_DIR-sidecar
if [[ "$S3_SERVER" == minio ]]; then
	S3_DIR=$DATA_DIR/minio # its own layout; never mixed with versitygw's
fi
TOKEN_FILE=$DATA_DIR/dev-token
ENV_FILE=$DATA_DIR/agentfs.env
RUN_PIDFILE=$LOG_DIR/run.pid
AGENTFS_PIDFILE=$LOG_DIR/agentfs.pid

pg_port=${AGENTFS_DEV_PG_PORT:-54329}
dev_oauth=0
[[ "${AGENTFS_DEV_OAUTH:-0}" == 1 ]] && dev_oauth=1
hydra_pub=${AGENTFS_DEV_HYDRA_PORT:-4444}
hydra_adm=$((hydra_pub + 1))
HYDRA_DIR=$DATA_DIR/hydra
HYDRA_CLIENT_FILE=$DATA_DIR/hydra-client.json
s3_port=${AGENTFS_DEV_S3_PORT:-7070}

start_pg=1
start_s3=1
[[ -n "${AGENTFS_DATABASE_URL:-}" ]] && start_pg=0
[[ -n "${AGENTFS_S3_ENDPOINT:-}" ]] && start_s3=0

: "${AGENTFS_LISTEN_ADDR:=127.0.0.1:8080}"
: "${AGENTFS_DATABASE_URL:=postgres://agentfs@127.0.0.1:$pg_port/agentfs?sslmode=disable}"
: "${AGENTFS_S3_ENDPOINT:=127.0.0.1:$s3_port}"
: "${AGENTFS_S3_ACCESS_KEY:=agentfs}"
: "${AGENTFS_S3_SECRET_KEY:=agentfs-secret}"
: "${AGENTFS_S3_BUCKET:=agentfs}"
: "${AGENTFS_S3_USE_SSL:=false}"
: "${AGENTFS_S3_REGION:=us-east-1}"

# URL for humans: a wildcard or empty listen host is reached via 127.0.0.1.
listen_host=${AGENTFS_LISTEN_ADDR%:*}
listen_port=${AGENTFS_LISTEN_ADDR##*:}
case "$listen_host" in
"" | 0.0.0.0 | "[::]" | "::") url_host=127.0.0.1 ;;
*) url_host=$listen_host ;;
esac
: "${AGENTFS_PUBLIC_URL:=http://$url_host:$listen_port}"
AGENTFS_URL=$AGENTFS_PUBLIC_URL

export AGENTFS_LISTEN_ADDR AGENTFS_PUBLIC_URL AGENTFS_DATABASE_URL \
	AGENTFS_S3_ENDPOINT AGENTFS_S3_ACCESS_KEY AGENTFS_S3_SECRET_KEY \
	AGENTFS_S3_BUCKET AGENTFS_S3_USE_SSL AGENTFS_S3_REGION

deps=()
((start_pg)) && deps+=(pg)
((start_s3)) && deps+=(s3)
((dev_oauth)) && deps+=(hydra jq)
if ((${#deps[@]} > 0)); then
	ensure_deps "${deps[@]}"
fi

mkdir -p "$DATA_DIR" "$LOG_DIR"
if is_root && ((start_pg)); then
	# Postgres runs as the postgres user and must reach .data/pg and its logs.
	chmod 755 "$DATA_DIR" "$LOG_DIR"
	runuser -u postgres -- test -x "$DATA_DIR" ||
		die "user postgres cannot reach $DATA_DIR; make its parent directories traversable (chmod 755)"
fi

# Only one run at a time over the same .data.
if [[ -f "$RUN_PIDFILE" ]]; then
	other=$(cat "$RUN_PIDFILE" 2>/dev/null || true)
	if [[ "$other" != "$$" ]] && _pid_alive "$other" &&
		grep -qa 'run\.sh' "/proc/$other/cmdline" 2>/dev/null; then
		die "another scripts/run.sh (pid $other) is using $DATA_DIR; stop it first"
	fi
fi
echo "$$" >"$RUN_PIDFILE"

# An AgentFS left over from an earlier run that was killed hard.
if [[ -f "$AGENTFS_PIDFILE" ]]; then
	old=$(cat "$AGENTFS_PIDFILE" 2>/dev/null || true)
	if _pid_alive "$old" agentfs; then
		log "stopping AgentFS left running by an earlier run (pid $old)"
		stop_pid "$old" agentfs 20
	fi
	rm -f "$AGENTFS_PIDFILE"
fi

agentfs_pid=""
pg_started=0
s3_started=0
hydra_started=0

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	set +e
	if [[ -n "$agentfs_pid" ]]; then
		stop_pid "$agentfs_pid" agentfs 20
		rm -f "$AGENTFS_PIDFILE"
	fi
	if ((hydra_started)); then
		hydra_stop "$HYDRA_DIR"
	fi
	if ((s3_started)); then
		s3_stop "$S3_DIR"
	fi
	if ((pg_started)); then
		pg_stop "$PG_DIR"
	fi
	rm -f "$RUN_PIDFILE"
	if ((pg_started || s3_started)); then
		log "stopped local servers (data kept in $DATA_DIR)"
	fi
	exit "$status"
}
trap cleanup EXIT
# Ctrl-C / TERM is the normal way to stop a dev server: exit 0.
trap 'log ""; log "stopping ..."; exit 0' INT TERM

if port_in_use "$listen_port" && [[ "$url_host" == 127.0.0.1 || "$url_host" == localhost ]]; then
	die "port $listen_port is already in use; set AGENTFS_LISTEN_ADDR to another address"
fi

log "building bin/agentfs ..."
go build -o bin/agentfs ./cmd/agentfs

if ((start_pg)); then
	pg_started=1
	pg_start "$PG_DIR" "$pg_port"
fi
if ((start_s3)); then
	s3_started=1
	s3_start "$S3_DIR" "$s3_port" "$AGENTFS_S3_ACCESS_KEY" "$AGENTFS_S3_SECRET_KEY"
fi

# The record key (AGENTFS_RECORD_KEY) of this .data: made once, kept with
# the database whose records it seals, so a later run still opens them.
RECORD_KEY_FILE=$DATA_DIR/record.key
if [[ -z "${AGENTFS_RECORD_KEY:-}" ]]; then
	if [[ ! -s "$RECORD_KEY_FILE" ]]; then
		(umask 077 && head -c 32 /dev/urandom | base64 >"$RECORD_KEY_FILE")
	fi
	AGENTFS_RECORD_KEY=$(tr -d '[:space:]' <"$RECORD_KEY_FILE")
fi
export AGENTFS_RECORD_KEY

if ((dev_oauth)); then
	hydra_started=1
	# No login app: the URLs only complete Hydra's configuration; client
	# credentials need none.
	URLS_LOGIN="http://127.0.0.1:$hydra_pub/oauth2/fallbacks/login" \
		URLS_CONSENT="http://127.0.0.1:$hydra_pub/oauth2/fallbacks/consent" \
		hydra_start "$HYDRA_DIR" "$hydra_pub" "$hydra_adm" "$(pg_create_database "$AGENTFS_DATABASE_URL" hydra)"
	: "${AGENTFS_OAUTH_ISSUER:=http://127.0.0.1:$hydra_pub/}"
	export AGENTFS_OAUTH_ISSUER
fi

log "running migrations ..."
bin/agentfs migrate

bin/agentfs serve &
agentfs_pid=$!
echo "$agentfs_pid" >"$AGENTFS_PIDFILE"

# serve exits early on a bad configuration: report its status then.
agentfs_exited() {
	set +e
	wait "$agentfs_pid"
	local status=$?
	agentfs_pid=""
	rm -f "$AGENTFS_PIDFILE"
	log "agentfs serve exited with status $status"
	exit "$status"
}

for ((i = 0; i < SERVER_START_TIMEOUT * 5; i++)); do
	bin/agentfs healthcheck --url "$AGENTFS_URL" --timeout 2s >/dev/null 2>&1 && break
	_pid_alive "$agentfs_pid" || agentfs_exited
	sleep 0.2
done
bin/agentfs healthcheck --url "$AGENTFS_URL" --timeout 2s >/dev/null ||
	die "AgentFS did not become ready within ${SERVER_START_TIMEOUT}s"

# The dev token of an earlier run, while this database still accepts it.
token=""
if [[ -s "$TOKEN_FILE" ]]; then
	token=$(tr -d '[:space:]' <"$TOKEN_FILE")
	if ! env -u AGENTFS_AGENT_ID -u AGENTFS_RUN_ID AGENTFS_URL="$AGENTFS_URL" AGENTFS_TOKEN="$token" \
		AGENTFS_MAX_ATTEMPTS=1 bin/agentfs ls --limit 1 >/dev/null 2>&1; then
		log "the dev token in $TOKEN_FILE is not accepted any more (revoked, or a new database): making a new one"
		token=""
	fi
fi
if [[ -z "$token" ]]; then
	token=$(bin/agentfs token create --subject dev | tail -n 1 | tr -d '[:space:]')
	[[ -n "$token" ]] || die "bin/agentfs token create printed no token"
	(umask 077 && printf '%s\n' "$token" >"$TOKEN_FILE")
fi

# The OAuth client of an earlier run, while Hydra still knows it.
oauth_text=""
if ((dev_oauth)); then
	hydra_admin="http://127.0.0.1:$hydra_adm"
	client_id=$(jq -r '.client_id // empty' "$HYDRA_CLIENT_FILE" 2>/dev/null || true)
	if [[ -z "$client_id" ]] || ! curl -sf -o /dev/null "$hydra_admin/admin/clients/$client_id"; then
		(umask 077 && "$HYDRA_BIN" create oauth2-client --endpoint "$hydra_admin" --name agentfs-dev \
			--grant-type client_credentials --scope read,write --audience "$AGENTFS_URL,$AGENTFS_URL/mcp" \
			--format json >"$HYDRA_CLIENT_FILE") || die "could not register an OAuth client at Hydra"
	fi
	client_id=$(jq -r .client_id "$HYDRA_CLIENT_FILE")
	client_secret=$(jq -r .client_secret "$HYDRA_CLIENT_FILE")
	oauth_text="
OAuth: Ory Hydra, issuer $AGENTFS_OAUTH_ISSUER (admin http://127.0.0.1:$hydra_adm); AGENTFS_OAUTH_ISSUER is set.
Client (client credentials, kept in $HYDRA_CLIENT_FILE):
  client id:     $client_id
  client secret: $client_secret
Get a token for this server (Hydra takes the resource as audience) and use it:
  TOKEN=\$(curl -sS -u '$client_id:$client_secret' -d grant_type=client_credentials -d 'scope=read write' -d audience=$AGENTFS_URL http://127.0.0.1:$hydra_pub/oauth2/token | jq -r .access_token)
  curl -sS $AGENTFS_URL/v1/files -H \"Authorization: Bearer \$TOKEN\"
MCP clients: point them at $AGENTFS_URL/mcp with this client id and secret (audience $AGENTFS_URL/mcp).
"
fi

# The environment of these servers, for another shell.
(
	umask 077
	{
		printf '# Written by make run (scripts/run.sh): the environment of its servers.\n'
		printf '# source it, then use the client verbs (bin/agentfs ls) or make another\n'
		printf '# token against the same database (bin/agentfs token create --subject NAME).\n'
		for name in AGENTFS_URL AGENTFS_DATABASE_URL AGENTFS_S3_ENDPOINT AGENTFS_S3_ACCESS_KEY \
			AGENTFS_S3_SECRET_KEY AGENTFS_S3_BUCKET AGENTFS_S3_USE_SSL AGENTFS_S3_REGION; do
			printf 'export %s=%q\n' "$name" "${!name}"
		done
		printf 'export AGENTFS_TOKEN=%q\n' "$token"
	} >"$ENV_FILE"
)

cat <<EOF

AgentFS: $AGENTFS_URL  (listening on $AGENTFS_LISTEN_ADDR)
Postgres: $AGENTFS_DATABASE_URL
S3:       $AGENTFS_S3_ENDPOINT (bucket $AGENTFS_S3_BUCKET)
Logs:     $LOG_DIR

Dev token (subject "dev", kept in $TOKEN_FILE for the next run):
  $token

  export AGENTFS_URL=$AGENTFS_URL
  export AGENTFS_TOKEN=$token

Try it:
  curl -sS -X POST "$AGENTFS_URL/v1/files?path=hello.txt" -H "Authorization: Bearer $token" -H "X-Run-ID: run-1" -H "Content-Type: text/plain" --data-binary 'hello'

Another shell, against these servers (the file also names the database):
  source $ENV_FILE
  bin/agentfs ls
  bin/agentfs token create --subject alice      # another token

${oauth_text}
Press Ctrl-C to stop AgentFS, Postgres$( ((dev_oauth)) && printf ', Hydra') and $S3_SERVER.

EOF

set +e
wait "$agentfs_pid"
status=$?
set -e
agentfs_pid=""
rm -f "$AGENTFS_PIDFILE"
log "agentfs serve exited with status $status"
exit "$status"
