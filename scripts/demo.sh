#!/usr/bin/env bash
# The main job, end to end (run by `make demo` after set-up): a USL analysis of a bundled real
# dataset, with a plot and an HTML report in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=.venv/bin/corecast
mkdir -p out

echo "== USL analysis of SPEC SDM91 (data/usl/specsdm91.csv)"
$CC usl data/usl/specsdm91.csv --predict 128,256 \
    --plot out/usl-specsdm91.png --report out/usl-specsdm91.html
echo
echo "reports written: out/usl-specsdm91.html, out/usl-specsdm91.png"
