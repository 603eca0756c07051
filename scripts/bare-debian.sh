#!/usr/bin/env bash
# The README's two commands on a bare Debian, as a new user meets them: for maintainers to run
# before a release, where a Docker engine runs (as root).
#
# A bare bookworm image is built with debootstrap from the apt mirror (no container registry is
# assumed reachable) and cached; the container gets only what the README presumes (python3,
# make, git), then a clean copy of the committed tree (`git archive HEAD`), and runs, as root:
#   make run      (twice: the second shows the cost of an installed tree)
#   make test     (only with --test: the whole suite, tens of minutes on two cores)
# Each command's exit code, wall time and the host's load are printed; the script exits non-zero
# if one failed. The container shares the host's network (the engine may have no bridge), and
# runs without Docker's seccomp/AppArmor profiles and /proc masks, with the machine's cgroups
# writable, so that bubblewrap, the default sandbox, makes its namespaces and enforces its
# limits as on a real machine (--privileged is refused where the engine runs in a container).
#
#   bash scripts/bare-debian.sh [--test] [--keep] [--image]
set -uo pipefail

IMAGE="${CALCGRAPH_BARE_IMAGE:-calcgraph/bare-debian:bookworm}"
CACHE=/var/cache/calcgraph
ROOTFS_TAR="$CACHE/bare-bookworm.tar"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN_TEST=0
KEEP=0
IMAGE_ONLY=0
for arg in "$@"; do
  case $arg in
    --test) RUN_TEST=1 ;;
    --keep) KEEP=1 ;;
    --image) IMAGE_ONLY=1 ;;
    *) echo "usage: $0 [--test] [--keep] [--image]" >&2; exit 2 ;;
  esac
done

say() { echo "bare-debian: $*" >&2; }

debian_mirror() {
  local uri
  uri=$(grep -h -m1 -E '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | awk '{print $2}' | head -n 1)
  echo "${uri:-http://deb.debian.org/debian}"
}

build_image() {
  docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
  mkdir -p "$CACHE"
  if [ ! -s "$ROOTFS_TAR" ]; then
    command -v debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; } || return 1
    local dir; dir=$(mktemp -d /var/tmp/calcgraph-bare.XXXXXX)
    say "debootstrap --variant=minbase bookworm into $dir"
    if ! debootstrap --variant=minbase bookworm "$dir" "$(debian_mirror)" \
      >"$CACHE/bare-debootstrap.log" 2>&1; then
      say "debootstrap failed; see $CACHE/bare-debootstrap.log"; rm -rf "$dir"; return 1
    fi
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -cf "$ROOTFS_TAR.part" . && mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$dir"
  fi
  docker import --change 'CMD ["bash"]' "$ROOTFS_TAR" "$IMAGE" >/dev/null
}

FAILED=0
# One step: the command as typed, its exit code, wall time and the host's load before and after.
step() {
  local label=$1; shift
  local load_before start code elapsed
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s%N)
  echo "=== \$ $label"
  docker exec "${EXEC_ENV[@]}" "$CONTAINER" bash -lc "$*" 2>&1 | sed 's/^/    /'
  code=${PIPESTATUS[0]}
  elapsed=$((($(date +%s%N) - start) / 1000000))
  printf '=== exit %s, %d.%01d s, load %s -> %s\n' "$code" $((elapsed / 1000)) \
    $((elapsed % 1000 / 100)) "$load_before" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$code" = 0 ] || FAILED=1
  return "$code"
}

build_image || { say "could not build $IMAGE"; exit 1; }
[ "$IMAGE_ONLY" = 1 ] && exit 0
CONTAINER=calcgraph-bare-$$
[ "$KEEP" = 1 ] || trap 'docker rm -f "$CONTAINER" >/dev/null 2>&1' EXIT
docker run -d --name "$CONTAINER" --network host -w /root \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt systempaths=unconfined --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
  "$IMAGE" sleep infinity >/dev/null || exit 1

# Behind a TLS-inspecting proxy the host trusts its CA through SSL_CERT_FILE: the container
# gets the same bundle for pip, npm (Node), curl and git, and the host's proxy variables.
EXEC_ENV=()
if [ -n "${SSL_CERT_FILE:-}" ] && [ -f "$SSL_CERT_FILE" ]; then
  docker cp -L "$SSL_CERT_FILE" "$CONTAINER:/etc/host-ca-bundle.pem" >/dev/null
  for name in SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS CURL_CA_BUNDLE \
    GIT_SSL_CAINFO; do
    EXEC_ENV+=(-e "$name=/etc/host-ca-bundle.pem")
  done
fi
# The test databases too, when set: the container shares the host's network, so a suite run on
# the host at the same time keeps its own PostgreSQL database and Redis number.
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
  CALCGRAPH_TEST_POSTGRES_URL CALCGRAPH_TEST_REDIS_URL; do
  [ -n "${!name:-}" ] && EXEC_ENV+=(-e "$name=${!name}")
done

say "copying the committed tree ($(git -C "$ROOT" rev-parse --short HEAD)) into $CONTAINER:/root/calcgraph"
git -C "$ROOT" archive --prefix=calcgraph/ HEAD | docker exec -i "$CONTAINER" tar -C /root -x

echo "host: $(nproc) cores; image $IMAGE ($(docker exec "$CONTAINER" cat /etc/debian_version))"
step "apt-get install python3 make git   # what the README presumes" \
  "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 make git >/dev/null" \
  || exit 1
step "python3 --version" "python3 --version"
step "make run" "cd calcgraph && make run"
step "make run   # again" "cd calcgraph && make run"
if [ "$RUN_TEST" = 1 ]; then
  step "make test" "cd calcgraph && make test"
fi
[ "$KEEP" = 1 ] && say "container $CONTAINER kept"
exit "$FAILED"
