#!/usr/bin/env bash
# Make the sandbox backends available for the tests: bubblewrap from its Debian package, and a
# Docker engine with the locally built base image when this machine can run one.
#
# Nothing here may fail the test run: a machine without Docker still runs the bwrap and process
# backends, and the docker tests skip with the reason (they probe the engine themselves).
# Run as root on a fresh Debian machine. Environment knobs:
#   CALCGRAPH_BASE_IMAGE   image name to build (default calcgraph/python-base)
#   CALCGRAPH_SKIP_DOCKER  set to 1 to leave Docker alone
set -uo pipefail

BASE_IMAGE="${CALCGRAPH_BASE_IMAGE:-calcgraph/python-base}"
CACHE=/var/cache/calcgraph
ROOTFS_TAR="$CACHE/python-base-bookworm.tar"
DOCKERD_LOG=/var/log/calcgraph-dockerd.log

say() { echo "ensure-sandboxes: $*" >&2; }

apt_updated=0
apt_install() {
  if [ "$(id -u)" != 0 ]; then say "not root: cannot install $*"; return 1; fi
  if [ "$apt_updated" = 0 ]; then apt-get update -qq || return 1; apt_updated=1; fi
  # Other setup scripts may hold the dpkg lock at the same moment: wait for it, do not fail.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$@" >/dev/null
}

ensure_bwrap() {
  command -v bwrap >/dev/null 2>&1 && return 0
  say "installing bubblewrap"
  apt_install bubblewrap || say "WARNING: bubblewrap unavailable; only the process backend runs"
}

engine_up() { timeout 10 docker info >/dev/null 2>&1; }

ensure_engine() {
  engine_up && return 0
  if ! command -v dockerd >/dev/null 2>&1; then
    say "installing docker.io"
    apt_install docker.io || { say "docker.io could not be installed"; return 1; }
  fi
  command -v docker >/dev/null 2>&1 || { say "no docker client on PATH"; return 1; }
  if [ "$(id -u)" != 0 ]; then say "not root: cannot start dockerd"; return 1; fi
  say "starting dockerd (overlay2, no bridge, no iptables); log in $DOCKERD_LOG"
  # Containers never need a network here (every sandbox runs with network none), so the engine
  # needs neither a bridge nor iptables, which many CI machines do not allow.
  nohup dockerd --storage-driver=overlay2 --iptables=false --bridge=none \
    >"$DOCKERD_LOG" 2>&1 </dev/null &
  for _ in $(seq 1 60); do engine_up && return 0; sleep 0.5; done
  say "dockerd did not answer within 30 s; see $DOCKERD_LOG"
  return 1
}

debian_mirror() {
  local uri
  uri=$(grep -h -m1 -E '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | awk '{print $2}' | head -n 1)
  if [ -z "$uri" ]; then
    uri=$(grep -h -m1 -E '^deb .*/debian/? ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}')
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

ensure_base_image() {
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return 0
  mkdir -p "$CACHE"
  if [ ! -s "$ROOTFS_TAR" ]; then
    # No registry is assumed reachable: build a minimal Debian with python3 from the apt mirror.
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap || return 1
    local dir; dir=$(mktemp -d /var/tmp/calcgraph-rootfs.XXXXXX)
    say "debootstrap bookworm with python3 into $dir (about a minute)"
    if ! debootstrap --variant=minbase --include=python3 bookworm "$dir" "$(debian_mirror)" \
      >"$CACHE/debootstrap.log" 2>&1; then
      say "debootstrap failed; see $CACHE/debootstrap.log"; rm -rf "$dir"; return 1
    fi
    # Package caches and lists only make the image bigger.
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -cf "$ROOTFS_TAR.part" . && mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$dir"
  fi
  say "importing $ROOTFS_TAR as $BASE_IMAGE"
  docker import --change 'CMD ["python3"]' --change 'USER 65534:65534' \
    "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
}

ensure_docker() {
  [ "${CALCGRAPH_SKIP_DOCKER:-0}" = 1 ] && { say "CALCGRAPH_SKIP_DOCKER=1: leaving Docker alone"; return 0; }
  if ensure_engine && ensure_base_image; then
    say "docker ready with $BASE_IMAGE"
    # A registry on loopback lets the tests push built function images (no registry is
    # reachable from here); Debian packages one.
    command -v docker-registry >/dev/null 2>&1 || apt_install docker-registry \
      || say "WARNING: docker-registry unavailable; the registry push test will skip"
    # The deploy test validates deploy/compose.yaml with the engine's compose command.
    docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 \
      || apt_install docker-compose \
      || say "WARNING: docker-compose unavailable; the compose validation test will skip"
  else
    say "WARNING: Docker unavailable; the docker sandbox tests will skip"
  fi
  return 0
}

ensure_bwrap
ensure_docker
exit 0
