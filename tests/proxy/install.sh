#!/usr/bin/env bash
# Installs Debian's nginx for the reverse-proxy test in tests/proxy, which runs
# the recipe deploy/proxy/nginx.conf in front of the real broker.
#
# Idempotent: does nothing when nginx is already present (MUSTER_NGINX or
# nginx on PATH or in /usr/sbin). Needs root (or sudo without a password) and
# Debian's package mirror: apt-get update once, then apt-get install -y
# --no-install-recommends nginx, non-interactively, as tests/pg/start.sh
# installs PostgreSQL. Installing starts no service; the test runs its own
# nginx as the current user, in a temporary directory.
#
# Environment:
#   MUSTER_TEST_NGINX=off  the caller opts out: install nothing, succeed (the
#                          test then skips, saying why).
#   MUSTER_NGINX           the nginx binary to use instead.
#
# Usage: tests/proxy/install.sh   (prints the path of nginx on success; exits
# non-zero with the reason on stderr when nginx cannot be installed)
set -euo pipefail

log() { printf 'tests/proxy/install.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ "${MUSTER_TEST_NGINX:-}" == off ]]; then
	log "MUSTER_TEST_NGINX=off: not installing nginx; the proxy test will skip"
	exit 0
fi

find_nginx() {
	local c
	for c in "${MUSTER_NGINX:-}" "$(command -v nginx 2>/dev/null || true)" /usr/sbin/nginx; do
		if [[ -n "$c" && -x "$c" ]]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

if path=$(find_nginx); then
	echo "$path"
	exit 0
fi

# shellcheck source=../lib/apt.sh
. "$(dirname "$0")/../lib/apt.sh"
apt_install nginx nginx

path=$(find_nginx) || die "nginx is installed but no nginx binary was found"
log "$("$path" -v 2>&1 || true)"
echo "$path"
