#!/bin/bash
# The official postgres image's environment contract, reimplemented in a
# few lines for the locally built image:
#   POSTGRES_PASSWORD          superuser password; required unless
#                              POSTGRES_HOST_AUTH_METHOD=trust
#   POSTGRES_USER              superuser name (default postgres)
#   POSTGRES_DB                database created at init (default: the user)
#   POSTGRES_INITDB_ARGS       extra initdb arguments
#   POSTGRES_HOST_AUTH_METHOD  pg_hba method for TCP clients (default
#                              scram-sha-256, or trust without a password)
#   /docker-entrypoint-initdb.d/*.sh, *.sql  run once, on an empty PGDATA
# Arguments that start with "-" are options for postgres. The server runs as
# the postgres user and listens on every address of the container.
set -Eeuo pipefail

if [ "${1:0:1}" = - ]; then
	set -- postgres "$@"
fi

if [ "$1" != postgres ]; then
	exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA"
	chown postgres:postgres "$PGDATA"
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export POSTGRES_USER POSTGRES_DB

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
		cat >&2 <<'MSG'
Error: the database is uninitialized and the superuser password is not set.
Set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust to allow every
connection without a password (test setups only).
MSG
		exit 1
	fi
	pwfile="$(mktemp)"
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	pwargs=()
	if [ -n "${POSTGRES_PASSWORD:-}" ]; then
		pwargs=(--pwfile="$pwfile")
	fi
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a word list by contract
	initdb --username="$POSTGRES_USER" --encoding=UTF8 --locale=C.UTF-8 \
		"${pwargs[@]}" ${POSTGRES_INITDB_ARGS:-} >/dev/null
	rm -f "$pwfile"

	method="${POSTGRES_HOST_AUTH_METHOD:-}"
	if [ -z "$method" ]; then
		method=scram-sha-256
	fi
	printf '\nhost all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"

	# Initialise over the unix socket only, so nobody connects half-way.
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
	psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --host /var/run/postgresql)
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";' >/dev/null
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) echo "entrypoint: running $f"; . "$f" ;;
		*.sql) echo "entrypoint: running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
		*) ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	echo "entrypoint: initialised $PGDATA"
fi

exec postgres -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "${@:2}"
