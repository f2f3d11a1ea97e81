#!/usr/bin/env bash
# Installs Debian's Chromium for the real-browser tests in tests/browser.
#
# Idempotent: does nothing when a usable Chromium is already present.
# Needs root (or sudo) and access to Debian's package mirror. Chromium is the
# only browser this harness drives; it downloads no browser build of its own.
#
# Usage: tests/browser/install.sh   (prints the path of the browser on success)
set -euo pipefail

find_chromium() {
	local c
	for c in "${MUSTER_CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
		if [[ -n "$c" && -x "$c" ]]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

if path=$(find_chromium); then
	echo "$path"
	exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install.sh: need root or sudo to install chromium" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
# One update, then the install; fonts-liberation gives the page readable text
# in screenshots (chromium pulls a minimal font set otherwise).
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
end=$(date +%s)

if ! path=$(find_chromium); then
	echo "install.sh: chromium still missing after apt-get install" >&2
	exit 1
fi
echo "install.sh: installed chromium in $((end - start))s: $("$path" --version 2>/dev/null || true)" >&2
echo "$path"
