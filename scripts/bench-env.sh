#!/usr/bin/env bash
# The benchmarks' own environment, .venv-bench: corecast (editable, C parts built in build/bench)
# with the `bench` extras -- the peers the benchmarks compare with. Extra-P pins numpy below 2,
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
.venv-bench/bin/ninja -C build/bench >/tmp/corecast-bench-ninja.log 2>&1 \
    || { tail -30 /tmp/corecast-bench-ninja.log; echo "bench: building the C parts failed"; exit 1; }
