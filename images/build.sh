#!/usr/bin/env bash
# Builds the images the compose topology and the docker test backend use, from
# Debian's packages only, for machines that cannot pull from an image registry:
#
#   quorumlock/debian-base:bookworm   debootstrap --variant=minbase, imported
#   quorumlock/redis:7                redis-server, gcc and libc6-dev (to build
#                                     the clock-jump shim), libfaketime
#   quorumlock/postgres:15            PostgreSQL 15 with an entrypoint that takes
#                                     the official image's environment
#   quorumlock/etcd:3.4               etcd-server (the chaos suite's etcd-3 on
#                                     the compose backend; compose/locks.yml)
#   quorumlock/zookeeper:3.8          ZooKeeper and a headless Java runtime
#                                     (zk-3; compose/locks.yml)
#
# A second run reuses what exists: the base is skipped when its tag is
# present, and the other two come from the build cache. QUORUMLOCK_REBUILD=1
# rebuilds the base too. QUORUMLOCK_DEBIAN_MIRROR overrides debootstrap's
# default mirror (for example a local cache); nothing here names one.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
suite="${QUORUMLOCK_DEBIAN_SUITE:-bookworm}"
base="${QUORUMLOCK_BASE_IMAGE:-quorumlock/debian-base:$suite}"
redis_image="${QUORUMLOCK_LOCAL_REDIS_IMAGE:-quorumlock/redis:7}"
postgres_image="${QUORUMLOCK_LOCAL_POSTGRES_IMAGE:-quorumlock/postgres:15}"
etcd_image="${QUORUMLOCK_LOCAL_ETCD_IMAGE:-quorumlock/etcd:3.4}"
zk_image="${QUORUMLOCK_LOCAL_ZOOKEEPER_IMAGE:-quorumlock/zookeeper:3.8}"

log() { printf -- '--- images: %s\n' "$*"; }

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

if [ "$(id -u)" -ne 0 ] && ! image_exists "$base"; then
	echo "images: debootstrap needs root to build $base; run as root (or sudo make images)" >&2
	exit 1
fi

rootfs=""
cleanup() {
	if [ -n "$rootfs" ] && [ -d "$rootfs" ]; then
		# debootstrap may leave /proc or /sys mounted inside after a failure.
		for m in proc sys dev/pts dev; do
			umount -l "$rootfs/$m" >/dev/null 2>&1 || true
		done
		rm -rf --one-file-system "$rootfs"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_base() {
	if ! command -v debootstrap >/dev/null 2>&1; then
		if command -v apt-get >/dev/null 2>&1; then
			log "installing debootstrap"
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap ||
				{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap; }
		else
			echo "images: debootstrap is missing and apt-get is not available to install it" >&2
			exit 1
		fi
	fi
	rootfs="$(mktemp -d "${TMPDIR:-/tmp}/quorumlock-rootfs.XXXXXX")"
	log "debootstrap --variant=minbase $suite (takes a few minutes the first time)"
	# shellcheck disable=SC2086 # the mirror is optional: one word or none
	debootstrap --variant=minbase "$suite" "$rootfs" ${QUORUMLOCK_DEBIAN_MIRROR:-} >"$rootfs.log" 2>&1 || {
		tail -n 30 "$rootfs.log" >&2
		rm -f "$rootfs.log"
		exit 1
	}
	rm -f "$rootfs.log"

	# Container conventions: no service may start during a package install,
	# no recommends, no package caches kept in layers.
	printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
	chmod 755 "$rootfs/usr/sbin/policy-rc.d"
	cat >"$rootfs/etc/apt/apt.conf.d/90quorumlock" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
	: >"$rootfs/etc/hostname"
	: >"$rootfs/etc/resolv.conf"

	log "importing $base"
	tar --numeric-owner -C "$rootfs" -c . |
		docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$base" >/dev/null
	cleanup
	rootfs=""
}

if [ "${QUORUMLOCK_REBUILD:-0}" = 1 ] || ! image_exists "$base"; then
	build_base
else
	log "$base exists; reusing it (QUORUMLOCK_REBUILD=1 rebuilds it)"
fi

# The default bridge may have no route out on some hosts while the host
# itself reaches Debian's archive; building on the host network avoids that.
build_net="${QUORUMLOCK_BUILD_NETWORK:-host}"

log "building $redis_image"
docker build --network "$build_net" --build-arg "BASE=$base" -t "$redis_image" "$here/redis"
log "building $postgres_image"
docker build --network "$build_net" --build-arg "BASE=$base" -t "$postgres_image" "$here/postgres"
log "building $etcd_image"
docker build --network "$build_net" --build-arg "BASE=$base" -t "$etcd_image" "$here/etcd"
log "building $zk_image"
docker build --network "$build_net" --build-arg "BASE=$base" -t "$zk_image" "$here/zookeeper"

log "done:"
docker image ls --format '{{.Repository}}:{{.Tag}}	{{.Size}}' |
	grep -E "^(${base%%:*}|${redis_image%%:*}|${postgres_image%%:*}|${etcd_image%%:*}|${zk_image%%:*}):" || true
