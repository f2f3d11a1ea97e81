#!/usr/bin/env bash
# Installs Debian's Redis and etcd for the peers benchmark in tests/peers.
#
# Idempotent: does nothing when redis-server and etcd are already present.
# Needs root (or sudo) and access to Debian's package mirror. The benchmark
# starts its own instances on free loopback ports; the packages' services are
# not used (and are stopped if the install started them, so they hold no port).
#
# Usage: tests/peers/install.sh
set -euo pipefail

have() { command -v redis-server >/dev/null 2>&1 && command -v etcd >/dev/null 2>&1; }
if have; then
	exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install.sh: need root or sudo to install redis-server and etcd-server" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
$SUDO apt-get update -qq
# policy-rc.d 101 keeps the packages' postinst from starting their services.
policy=/usr/sbin/policy-rc.d
added=""
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
	$SUDO chmod +x "$policy"
	added=1
fi
rc=0
$SUDO apt-get install -y -qq --no-install-recommends redis-server etcd-server >/dev/null || rc=$?
if [[ -n $added ]]; then
	$SUDO rm -f "$policy"
fi
end=$(date +%s)
if [[ $rc -ne 0 ]] || ! have; then
	echo "install.sh: redis-server or etcd still missing after apt-get install" >&2
	exit 1
fi
echo "install.sh: installed redis-server and etcd-server in $((end - start))s" >&2
