#!/usr/bin/env bash
# Set up everything corecast needs on a fresh Debian machine, idempotently:
# Debian packages (setup/debian-packages.txt), a virtual environment in .venv, and corecast
# itself installed into it for development: the Python sources used where they are, the C parts
# under native/ and workloads/ compiled by meson and ninja in build/editable (scripts/dev_install.py).
# A second run on an unchanged tree does no work beyond checking.
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
fi

# pip installs corecast editable with meson-python (its metadata, the `corecast` command, and
# the meson build directory build/editable), which only needs redoing when what it acts on
# changed: the package metadata and dependencies (pyproject.toml) or the list of C targets
# (meson.build files). A stamp holds their hash. scripts/dev_install.py then replaces
# meson-python's editable loader, which every Python start in .venv imported (~40 ms of CPU) and
# which ran ninja at every `import corecast`, with a plain path entry to src/; ninja runs below
# (and `make native`, and at the start of a test session: tests/conftest.py).
stamp=.venv/.corecast-setup
want=$(cat pyproject.toml meson.build $(find native workloads -name meson.build | sort) | sha256sum | cut -c1-64)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -f build/editable/build.ninja ] || [ ! -x .venv/bin/corecast ]; then
    rm -f "$stamp"
    # The build backend goes into .venv itself (no isolated build environment each time), so
    # that the build directory stays valid between runs.
    # The requirements (build backend, dependencies, test extras) are installed first, each
    # package built the usual way (an sdist such as argparse-manpage in an isolated build
    # environment); corecast itself then goes in without isolation and without dependencies.
    reqs=$("$PY" -c 'import tomllib; t = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(t["build-system"]["requires"] + t["project"]["dependencies"]
                + t["project"]["optional-dependencies"]["test"]))')
    echo "setup: installing corecast into .venv (meson builds the C parts in build/)"
    export PATH="$PWD/.venv/bin:$PATH"   # meson and ninja from .venv
    echo "$reqs" > .venv/.corecast-requirements.txt
    .venv/bin/python -m pip install -q --disable-pip-version-check -r .venv/.corecast-requirements.txt \
        || { echo "setup: pip install of corecast's requirements failed"; exit 1; }
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
        -Cbuild-dir=build/editable -e . \
        || { echo "setup: pip install failed"; exit 1; }
    echo "$want" > "$stamp"
fi
# No editable loader: corecast from src/ by a path entry (also on an environment that an earlier
# set-up gave meson-python's loader: it is removed, so that only one of the two is active).
.venv/bin/python scripts/dev_install.py --venv || { echo "setup: the development install failed"; exit 1; }
# Python's bytecode for corecast's own modules, written now rather than at the first start of
# each (only stale files are rewritten; `__pycache__` is left out of wheels by meson.build).
.venv/bin/python -m compileall -q -j 0 src/corecast >/dev/null \
    || echo "setup: note: could not write bytecode for src/corecast (corecast starts slower)"
# Build whatever C changed, and say so if it fails; then link each product into
# src/corecast/_native/, where a wheel has it (links to build/editable: a rebuild is seen at once).
.venv/bin/ninja -C build/editable >/tmp/corecast-ninja.log 2>&1 \
    || { tail -30 /tmp/corecast-ninja.log; echo "setup: building the C parts failed"; exit 1; }
.venv/bin/python scripts/dev_install.py --links build/editable \
    || { echo "setup: linking the C parts into src/corecast/_native failed"; exit 1; }
# Man pages: into the environment's man path, and as root onto man's default path too, indexed
# for whatis and apropos (scripts/install_man.sh; links to man/, so they follow the tree).
if [ "$(id -u)" = 0 ]; then
    scripts/install_man.sh "$PWD/.venv" /usr/local
else
    scripts/install_man.sh "$PWD/.venv"
    echo "setup: note: man pages are in .venv/share/man (found with .venv/bin on PATH); as root, setup also links them into /usr/local/share/man"
fi
