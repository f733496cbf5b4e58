#!/usr/bin/env bash
# Drives compose/redlock-5.yml: `make up`, `make down` and the CI smoke.
#
#   compose/stack.sh up      start everything and wait until every service is
#                            healthy; on failure or Ctrl-C, tear it all down
#   compose/stack.sh down    remove containers, volumes and the network
#   compose/stack.sh ps      show the services
#   compose/stack.sh smoke   up, check that each service answers on its host
#                            port, down; always leaves nothing running
#
# Images: QUORUMLOCK_REDIS_IMAGE and QUORUMLOCK_POSTGRES_IMAGE when set;
# otherwise the images `make images` built (compose/local.env) when they
# exist; otherwise the official images, which compose pulls.
# QUORUMLOCK_UP_TIMEOUT bounds the wait for health (seconds, default 180).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
file="$here/redlock-5.yml"
project="${COMPOSE_PROJECT_NAME:-quorumlock}"
services=(redis-1 redis-2 redis-3 redis-4 redis-5 redis-primary redis-replica postgres)

# The compose v2 plugin when it works, else the standalone v1 binary.
if docker compose version >/dev/null 2>&1; then
	compose_bin=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	compose_bin=(docker-compose)
else
	echo "stack: neither 'docker compose' nor 'docker-compose' works" >&2
	exit 1
fi

env_args=()
if [ -z "${QUORUMLOCK_REDIS_IMAGE:-}${QUORUMLOCK_POSTGRES_IMAGE:-}" ] &&
	docker image inspect quorumlock/redis:7 quorumlock/postgres:15 >/dev/null 2>&1; then
	env_args=(--env-file "$here/local.env")
fi

compose() { "${compose_bin[@]}" "${env_args[@]}" -p "$project" -f "$file" "$@"; }

say() { printf -- '--- stack: %s\n' "$*"; }

down() {
	say "down (containers, volumes, network)"
	compose down --volumes --remove-orphans --timeout 5
}

# states prints "service state" for every service (the containers have fixed
# names); state is the health status, or the container's status for a
# container without one, or "missing".
states() {
	local s
	for s in "${services[@]}"; do
		printf '%s %s\n' "$s" \
			"$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "quorumlock-$s" 2>/dev/null || echo missing)"
	done
}

wait_healthy() {
	local timeout="${QUORUMLOCK_UP_TIMEOUT:-180}" start=$SECONDS pending s h
	while :; do
		pending=()
		while read -r s h; do
			case "$h" in
			healthy) ;;
			unhealthy | exited | dead) echo "stack: $s is $h" >&2; return 1 ;;
			*) pending+=("$s:$h") ;;
			esac
		done < <(states)
		if [ "${#pending[@]}" -eq 0 ]; then
			say "all ${#services[@]} services healthy after $((SECONDS - start))s"
			return 0
		fi
		if [ $((SECONDS - start)) -ge "$timeout" ]; then
			echo "stack: not healthy after ${timeout}s: ${pending[*]}" >&2
			return 1
		fi
		sleep 1
	done
}

# up starts the topology; anything short of all-healthy (including Ctrl-C)
# tears it down again, so a failed `make up` leaves nothing behind.
up() {
	trap 'status=$?; trap - EXIT INT TERM; if [ "$status" -ne 0 ]; then compose ps >&2 || true; compose logs --tail 20 >&2 || true; down || true; fi; exit "$status"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	say "up (${env_args[*]:-official images})"
	compose up -d
	wait_healthy
	compose ps
	trap - EXIT INT TERM
}

# redis_line sends one inline command to 127.0.0.1:$1 and prints line $2
# of the reply, with bash's /dev/tcp, so the check needs no client on the
# host. (Line 5 of "CONFIG GET name" is the value.)
redis_line() {
	local port="$1" nth="$2" line="" i
	shift 2
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 0
	printf '%s\r\n' "$*" >&3
	for ((i = 1; i <= nth; i++)); do
		IFS= read -r -t 3 line <&3 || { line=""; break; }
	done
	exec 3<&- 3>&-
	printf '%s\n' "${line%$'\r'}"
}

redis_cmd() {
	local port="$1"
	shift
	redis_line "$port" 1 "$@"
}

expect() {
	local what="$1" want="$2" got="$3"
	if [ "$got" != "$want" ]; then
		echo "stack: $what: want '$want', got '$got'" >&2
		return 1
	fi
	echo "  ok  $what"
}

smoke() {
	trap 'status=$?; trap - EXIT INT TERM; if [ "$status" -ne 0 ]; then compose ps >&2 || true; compose logs --tail 20 >&2 || true; fi; down || true; leftovers || status=1; exit "$status"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	say "smoke: up (${env_args[*]:-official images})"
	compose up -d
	wait_healthy
	compose ps
	local key="smoke:$$:$RANDOM" p
	for p in 16381 16382 16383 16384 16385 16390 16391; do
		expect "redis 127.0.0.1:$p answers PING" "+PONG" "$(redis_cmd "$p" PING)"
	done
	for p in 16381 16382 16383 16384 16385; do
		expect "redis 127.0.0.1:$p maxmemory-policy" noeviction "$(redis_line "$p" 5 CONFIG GET maxmemory-policy)"
		expect "redis 127.0.0.1:$p is a primary" "role:master" "$(redis_line "$p" 3 INFO replication)"
	done
	expect "redis-1 takes a write" "+OK" "$(redis_cmd 16381 SET "$key" v)"
	expect "redis-2 does not see redis-1's write" "\$-1" "$(redis_cmd 16382 GET "$key")"
	expect "redis-primary takes a write" "+OK" "$(redis_cmd 16390 SET "$key" v)"
	local got="" i
	for i in $(seq 50); do
		got="$(redis_cmd 16391 EXISTS "$key")"
		[ "$got" = ":1" ] && break
		sleep 0.1
	done
	expect "redis-replica receives the primary's write" ":1" "$got"
	expect "postgres 127.0.0.1:15432 runs queries" "1" \
		"$(compose exec -T postgres psql -h 127.0.0.1 -U postgres -d quorumlock -tAc 'select 1' | tr -d '\r')"
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -h 127.0.0.1 -p 15432 -d quorumlock >/dev/null
		echo "  ok  postgres answers on 127.0.0.1:15432 from the host"
	fi
	say "smoke passed"
}

# leftovers fails if anything of the project survived `down`.
leftovers() {
	local left
	left="$(docker ps -aq --filter "label=com.docker.compose.project=$project")"
	left+="$(docker volume ls -q --filter "label=com.docker.compose.project=$project")"
	left+="$(docker network ls -q --filter "name=^quorumlock$")"
	if [ -n "$left" ]; then
		echo "stack: left behind after down: $left" >&2
		return 1
	fi
	say "nothing left running"
}

case "${1:-}" in
up) up ;;
down) down && leftovers ;;
ps) compose ps ;;
smoke) smoke ;;
config) compose config ;;
*)
	echo "usage: $0 up|down|ps|smoke|config" >&2
	exit 2
	;;
esac
