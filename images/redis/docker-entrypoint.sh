#!/bin/sh
# The official redis image's contract, reimplemented: arguments that start
# with "-" (or name a .conf file) are options for redis-server; redis-server
# runs as the redis user with /data owned by it; protected mode is off, as
# in the official image, since containers are reached from outside the
# loopback interface. Later arguments override earlier ones, so a caller can
# still pass --protected-mode yes.
set -e

case "$1" in
-* | *.conf) set -- redis-server "$@" ;;
esac

if [ "$1" = redis-server ]; then
	shift
	case "$1" in
	*.conf) conf="$1"; shift; set -- redis-server "$conf" --protected-mode no "$@" ;;
	*) set -- redis-server --protected-mode no "$@" ;;
	esac
	if [ "$(id -u)" = 0 ]; then
		find . \! -user redis -exec chown redis '{}' + 2>/dev/null || true
		exec setpriv --reuid=redis --regid=redis --init-groups "$@"
	fi
fi
exec "$@"
