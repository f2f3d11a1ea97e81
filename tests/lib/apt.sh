# Sourced by the test scripts that install a Debian package when a tool is
# missing (the machine has Debian's registry and no other). The caller
# defines die (prints its message and exits).
#
#   apt_install WHAT PACKAGE…   installs PACKAGE… with apt-get (through
#                               sudo -n when not root), no recommends; WHAT
#                               names the missing tool in the messages.
# apt-get update runs once per machine boot and test run (a stamp in /tmp),
# not once per script.
apt_install() {
  local what=$1
  shift
  command -v apt-get >/dev/null || die "no $what and no apt-get to install it"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null && sudo -n true 2>/dev/null || die "installing $* needs root (or sudo without a password)"
    sudo=(sudo -n)
  fi
  local stamp=/tmp/muster-apt-updated start=$SECONDS
  printf 'no %s found; installing %s (apt-get)\n' "$what" "$*" >&2
  if [[ ! -e $stamp || $stamp -ot /proc/1 ]]; then
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || die "apt-get update failed"
    touch "$stamp" 2>/dev/null || true
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 ||
    die "apt-get install -y --no-install-recommends $* failed"
  printf '%s installed in %d s\n' "$*" $((SECONDS - start)) >&2
}
