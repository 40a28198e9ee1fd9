#!/usr/bin/env bash
#
# Install every part the tests and benchmarks may need, print their versions,
# and show that each one runs (make tools).
#
#   scripts/tools.sh                 # all of ensure_deps' words
#   scripts/tools.sh node npm hydra  # only these (see scripts/lib.sh)
#
# Each word is installed when missing (ensure_deps WORD) and timed; a second
# run installs nothing. Then the checks: the Inspector CLI calls a tool of
# the reference filesystem server, the conformance runner lists its
# scenarios, the MCP SDK's client and Turso's agentfs-sdk do real work,
# headless Debian Chromium driven by playwright-core screenshots a page and
# axe-core scans it, and Hydra starts on a database of its own, answers its
# discovery and health endpoints and mints a client-credentials JWT. Hydra
# uses the Postgres of AGENTFS_TEST_DATABASE_URL when it is set, else a
# throwaway one. TOOLS_KEEP=1 keeps the temporary directory (logs, the
# screenshot).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

WORDS=("$@")
if ((${#WORDS[@]} == 0)); then
	WORDS=(pg s3 python jq node npm hydra chromium fuse rg rclone haproxy autofailover)
fi

# now_us: microseconds since the epoch; since_s START_US: seconds since then.
now_us() { printf '%s\n' "${EPOCHREALTIME/./}"; }
since_s() {
	local ds=$((($(now_us) - $1) / 100000))
	printf '%d.%d\n' $((ds / 10)) $((ds % 10))
}

# has WORD: WORD is one of the words asked for.
has() {
	local w
	for w in "${WORDS[@]}"; do
		[[ "$w" == "$1" ]] && return 0
	done
	return 1
}

TOOLS_TMP=""
pg_dir=""
hydra_dir=""
hydra_db=""
hydra_db_url=""

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	set +e
	[[ -n "$hydra_dir" ]] && hydra_stop "$hydra_dir"
	if [[ -n "$hydra_db" ]]; then
		psql -X -q "$hydra_db_url" -c "drop database if exists $hydra_db" >/dev/null 2>&1
	fi
	[[ -n "$pg_dir" ]] && pg_stop "$pg_dir"
	remove_tmp "$TOOLS_TMP" TOOLS_KEEP
	exit "$status"
}
trap_cleanup

echo "==> installing what is missing"
for w in "${WORDS[@]}"; do
	start=$(now_us)
	ensure_deps "$w"
	printf 'ready: %-12s %6s s\n' "$w" "$(since_s "$start")"
done

echo "==> versions"
tool_versions "${WORDS[@]}"

TOOLS_TMP=$(make_tmp tools)
LOG_DIR=$TOOLS_TMP/log

echo "==> checks"
if has npm; then
	check=$NODE_TOOLS_DIR/check.mjs
	fsroot=$TOOLS_TMP/fs
	mkdir -p "$fsroot"
	printf 'hello from the Inspector\n' >"$fsroot/hello.txt"
	# The server's command comes first: --tool-arg takes every word after it.
	out=$(cd "$NODE_TOOLS_DIR" && npx --no-install @modelcontextprotocol/inspector --cli \
		node node_modules/@modelcontextprotocol/server-filesystem/dist/index.js "$fsroot" \
		--method tools/call --tool-name read_text_file --tool-arg "path=$fsroot/hello.txt" 2>/dev/null) ||
		die "the Inspector CLI failed: $out"
	grep -q 'hello from the Inspector' <<<"$out" || die "the Inspector CLI did not read the file: $out"
	mcp-inspector --cli --help >/dev/null || die "mcp-inspector --cli --help failed"
	echo "inspector: $(mcp-inspector --cli --version 2>/dev/null) called read_text_file of the reference filesystem server"
	conformance --help >/dev/null || die "conformance --help failed"
	grep -q 'server-initialize' <<<"$(conformance list)" || die "conformance list names no server-initialize"
	echo "conformance: $(conformance --version) lists $(conformance list | grep -c '^  - ') scenarios"
	node "$check" mcp "$fsroot"
	node "$check" agentfs-sdk "$TOOLS_TMP"
	if has chromium; then
		node "$check" chromium "$TOOLS_TMP/chromium.png"
	fi
fi

if has hydra; then
	db_url=${AGENTFS_TEST_DATABASE_URL:-}
	if [[ -z "$db_url" ]]; then
		ensure_deps pg
		pg_dir=$TOOLS_TMP/pg
		pg_port=$(free_port)
		pg_start "$pg_dir" "$pg_port" test || die "Postgres did not start"
		db_url="postgres://agentfs@127.0.0.1:$pg_port/agentfs?sslmode=disable"
	fi
	ensure_deps jq
	hydra_db=hydra_tools_$$
	hydra_db_url=$db_url
	dsn=$(pg_create_database "$db_url" "$hydra_db")
	hydra_dir=$TOOLS_TMP/hydra
	pub=$(free_port)
	adm=$(free_port "$pub")
	start=$(now_us)
	hydra_start "$hydra_dir" "$pub" "$adm" "$dsn" || die "Hydra did not start"
	took=$(since_s "$start")
	issuer=$(curl -sf "http://127.0.0.1:$pub/.well-known/openid-configuration" | jq -r .issuer) ||
		die "Hydra serves no /.well-known/openid-configuration"
	[[ "$issuer" == "http://127.0.0.1:$pub/" ]] || die "Hydra's issuer is $issuer"
	audience=http://127.0.0.1:8080
	client=$("$HYDRA_BIN" create oauth2-client --endpoint "http://127.0.0.1:$adm" \
		--grant-type client_credentials --scope read,write --audience "$audience" --format json) ||
		die "hydra create oauth2-client failed"
	token=$(curl -sf -u "$(jq -r .client_id <<<"$client"):$(jq -r .client_secret <<<"$client")" \
		-d grant_type=client_credentials -d scope=read -d audience="$audience" \
		"http://127.0.0.1:$pub/oauth2/token" | jq -r .access_token) ||
		die "Hydra minted no client-credentials token"
	# The JWT's payload (base64url, unpadded).
	payload=$(cut -d. -f2 <<<"$token" | tr '_-' '/+')
	while ((${#payload} % 4)); do payload+='='; done
	claims=$(base64 -d <<<"$payload" | jq -c '{iss, aud, scope}')
	[[ "$claims" == "{\"iss\":\"$issuer\",\"aud\":[\"$audience\"],\"scope\":\"read\"}" ]] ||
		die "the token's claims are $claims"
	hydra_stop "$hydra_dir"
	hydra_dir=""
	echo "hydra: migrated and ready in ${took} s; a client-credentials JWT for $audience carries $claims"
fi
echo "tools: every part asked for is installed and runs"
