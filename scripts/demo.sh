#!/usr/bin/env bash
# The main job, end to end (run by `make demo` after set-up):
#  1. measure a bundled workload (a lock-contention benchmark) on every core of this machine,
#     pinned, 3 repetitions per core count, with the sync shim and every software stall source;
#  2. predict its time and throughput up to 64 cores and name the bottleneck, with a report;
#  3. a USL analysis of a bundled real dataset (SPEC SDM91), with a report.
# Everything lands in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=.venv/bin/corecast
mkdir -p out
rm -f out/lockbench.db out/lockbench.db-wal out/lockbench.db-shm

echo "== 1. measure corecast-lockbench on every core of this machine ($(nproc) logical CPUs)"
$CC measure --reps 3 --warmup 1 -o out/lockbench.db -- \
    corecast-lockbench -t {threads} -n 1000000 --cs 50 --think 400
echo
echo "== 2. predict it to 64 cores"
$CC predict out/lockbench.db --cores 4,8,16,32,64 --plot out/lockbench.png --report out/lockbench.html
echo
echo "== 3. USL analysis of SPEC SDM91 (data/usl/specsdm91.csv)"
$CC usl data/usl/specsdm91.csv --predict 128,256 \
    --plot out/usl-specsdm91.png --report out/usl-specsdm91.html
echo
echo "written: out/lockbench.db (the campaign), out/lockbench.html, out/lockbench.png,"
echo "         out/usl-specsdm91.html, out/usl-specsdm91.png"
