#!/usr/bin/env bash
# The benchmarks' own environment, .venv-bench: corecast as the development install of
# `make setup` has it (scripts/dev_install.py: the sources in src/, the C parts linked into
# src/corecast/_native from build/editable, no editable loader at start-up) with the `bench`
# extras -- the peers the benchmarks compare with. Extra-P pins numpy below 2,
# which the test environment's pandas does not accept, so the two environments are kept apart.
# A second run on an unchanged tree does no work beyond checking.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv-bench/bin/python ]; then
    echo "bench: creating .venv-bench"
    "$PY" -m venv .venv-bench
fi
stamp=.venv-bench/.corecast-setup
want=$(cat pyproject.toml meson.build $(find native workloads -name meson.build | sort) | sha256sum | cut -c1-64)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv-bench/bin/python -c 'import corecast.native, extrap' 2>/dev/null; then
    rm -f "$stamp"
    reqs=$("$PY" -c 'import tomllib; t = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(t["build-system"]["requires"] + t["project"]["dependencies"]
                + t["project"]["optional-dependencies"]["bench"]))')
    echo "$reqs" > .venv-bench/.corecast-requirements.txt
    export PATH="$PWD/.venv-bench/bin:$PATH"
    .venv-bench/bin/python -m pip install -q --disable-pip-version-check -r .venv-bench/.corecast-requirements.txt \
        || { echo "bench: pip install of the benchmark requirements failed"; exit 1; }
    .venv-bench/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
        -Cbuild-dir=build/bench -e . || { echo "bench: pip install of corecast failed"; exit 1; }
    echo "$want" > "$stamp"
fi
# pip's editable install gives the metadata and the `corecast` command (it builds in build/bench
# once); the path entry replaces meson-python's loader, which start-up figures would include,
# and `corecast` becomes the C front end that `make setup` built (native/stat/front.c).
.venv-bench/bin/python scripts/dev_install.py --venv || { echo "bench: the development install failed"; exit 1; }
