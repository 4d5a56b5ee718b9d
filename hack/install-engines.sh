#!/usr/bin/env bash
# Installs, from Debian's packages, the engines the local cloud runs behind its data planes:
#   PostgreSQL 15 (postgresql-15): Microsoft.DBforPostgreSQL/flexibleServers
#   Redis 7      (redis-server):  Microsoft.Cache/redis
# The packages' own services are not started and no default cluster is created: the cloud runs
# one process per server or cache itself, under the cloud's data dir. Idempotent: nothing is
# fetched when both are there.
set -euo pipefail

pgbin=/usr/lib/postgresql/15/bin
if [ -x "$pgbin/initdb" ] && [ -x "$pgbin/postgres" ] && command -v redis-server >/dev/null 2>&1; then
	exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi
echo "installing postgresql-15 and redis-server from Debian's packages (first run only)…" >&2
# No "main" cluster: postgresql-common reads this before the package's postinst runs.
"${sudo[@]}" mkdir -p /etc/postgresql-common
if ! grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf; then
	echo "create_main_cluster = false" | "${sudo[@]}" tee -a /etc/postgresql-common/createcluster.conf >/dev/null
fi
# No service starts during the install (invoke-rc.d asks policy-rc.d; 101 = not allowed).
added_policy=false
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
	"${sudo[@]}" chmod 755 /usr/sbin/policy-rc.d
	added_policy=true
fi
cleanup() { if $added_policy; then "${sudo[@]}" rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 redis-server >/dev/null
if [ ! -x "$pgbin/postgres" ] || ! command -v redis-server >/dev/null 2>&1; then
	echo "postgresql-15 or redis-server is installed but its programs are missing" >&2
	exit 1
fi
