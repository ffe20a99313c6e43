#!/usr/bin/env bash
# Set up everything corecast needs on a fresh Debian machine, idempotently:
# Debian packages (setup/debian-packages.txt), a virtual environment in .venv, and corecast
# itself installed into it (which compiles the C parts under native/ and workloads/).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# Debian packages: install only what is missing.
missing=()
while read -r pkg _; do
    case "$pkg" in ''|'#'*) continue ;; esac
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < setup/debian-packages.txt
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/corecast-apt.log 2>&1; then
        $SUDO apt-get update -q >>/tmp/corecast-apt.log 2>&1
        $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/corecast-apt.log 2>&1 \
            || { tail -20 /tmp/corecast-apt.log; echo "setup: apt-get install failed"; exit 1; }
    fi
fi

"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "setup: corecast needs Python >= 3.11 ($PY is $("$PY" --version))"; exit 1; }

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
fi
echo "setup: installing corecast into .venv (builds the C parts)"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" \
    || { echo "setup: pip install failed"; exit 1; }
