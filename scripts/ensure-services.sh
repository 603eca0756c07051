#!/usr/bin/env bash
# Make PostgreSQL and Redis answer on loopback for the tests and benchmarks: use them when they
# answer, start them when installed but stopped, install them from Debian packages when missing;
# and curl, which the README's examples (run by the tests) use.
set -euo pipefail

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {  # port name
  for _ in $(seq 1 60); do listening "$1" && return 0; sleep 0.5; done
  echo "ensure-services: $2 did not start on 127.0.0.1:$1" >&2
  return 1
}

ensure_postgres() {
  listening 5432 && return 0
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
    echo "ensure-services: installing PostgreSQL"
    apt_install postgresql
    local version; version=$(ls /etc/postgresql | sort -V | tail -n 1)
    local hba="/etc/postgresql/$version/main/pg_hba.conf"
    # A machine we set up for tests: trust on loopback, as on the CI machines.
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  local version; version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "ensure-services: starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for 5432 PostgreSQL
}

ensure_redis() {
  listening 6379 && return 0
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "ensure-services: installing Redis"
    apt_install redis-server
  fi
  echo "ensure-services: starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for 6379 Redis
}

# The README's first-hour examples call curl (tests/docs/test_readme.py runs them); a bare
# Debian has none.
ensure_curl() {
  command -v curl >/dev/null 2>&1 && return 0
  echo "ensure-services: installing curl (the README's examples use it)"
  apt_install curl
}

ensure_postgres
ensure_redis
ensure_curl
