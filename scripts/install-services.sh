#!/usr/bin/env bash
# Installs the database servers the test suite starts on loopback (PostgreSQL and Redis,
# from Debian's packages) when they are missing. The tests start and stop their own
# server instances in temporary directories; nothing here starts a service.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-services: missing ${need[*]}; run as root: apt-get install -y ${need[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the packaged services on install; the tests run their own instances.
service redis-server stop >/dev/null 2>&1 || true
service postgresql stop >/dev/null 2>&1 || true
