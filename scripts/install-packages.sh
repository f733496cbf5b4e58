#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing,
# so that `make test` and `make chaos` work on a fresh Debian machine that
# has only Go and make: directly when run as root, else through sudo. Prints
# one line when it installs something and nothing when all is there.
#
# QUORUMLOCK_SKIP_INSTALL=1 skips it, for machines that provide the programs
# some other way.
set -euo pipefail

if [ "${QUORUMLOCK_SKIP_INSTALL:-0}" = 1 ] || [ "$#" -eq 0 ]; then
	exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
	# Not Debian: the package names mean nothing here, so look for the
	# programs and leave the installing to the user.
	missing=()
	for prog in redis-server gcc faketime; do
		command -v "$prog" >/dev/null 2>&1 || missing+=("$prog")
	done
	if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
		missing+=("PostgreSQL (initdb, postgres)")
	fi
	if [ "${#missing[@]}" -gt 0 ]; then
		echo "not a Debian system (no apt-get), and these are missing: ${missing[*]}; install them, or set QUORUMLOCK_SKIP_INSTALL=1 to go on without" >&2
		exit 1
	fi
	exit 0
fi

missing=()
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

apt_cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
	sudo=()
	how="as root"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
	how="through sudo"
elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then
	sudo=(sudo)
	how="through sudo (it may ask for your password)"
else
	echo "missing Debian packages: ${missing[*]}; not root and no usable sudo, so run as root: $apt_cmd" >&2
	exit 1
fi

echo "--- installing ${missing[*]} with apt-get $how"
log="$(mktemp "${TMPDIR:-/tmp}/quorumlock-apt.XXXXXX")"
trap 'rm -f "$log"' EXIT
if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive sh -c "$apt_cmd" >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "apt-get failed (the last lines are above); the command was: $apt_cmd" >&2
	exit 1
fi
