#!/usr/bin/env bash
# make's virtual environment: Python >= 3.11 with its venv module. On Debian and Ubuntu the
# venv module is a separate package (python3.X-venv); as root it is installed when missing,
# otherwise, as for a missing or old Python, one line says what to install and make stops.
#   bash scripts/ensure-venv.sh PYTHON VENV
set -uo pipefail
PYTHON=$1
VENV=$2

stop() { echo "make: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 \
  || stop "calcgraph needs Python >= 3.11 and there is no $PYTHON: install it (Debian/Ubuntu: apt-get install python3), or make PYTHON=/path/to/python3.11"
version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
  || stop "$PYTHON does not run"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || stop "calcgraph needs Python >= 3.11 and $PYTHON is $version: install one (Debian/Ubuntu: apt-get install python3.11) and run make PYTHON=python3.11"

if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  package="python$version-venv"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "make: $PYTHON has no venv module: apt-get install $package" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$package" >/dev/null; } \
      || stop "could not install $package: install it (apt-get install $package) and run make again"
  else
    stop "$PYTHON has no venv module: install it as root (Debian/Ubuntu: apt-get install $package) and run make again"
  fi
fi

if ! "$PYTHON" -m venv "$VENV"; then
  rm -rf "$VENV"  # a half-made environment would pass for a made one next time
  stop "$PYTHON -m venv $VENV failed (see above)"
fi
