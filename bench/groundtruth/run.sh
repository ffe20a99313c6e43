#!/usr/bin/env bash
# The ground-truth kit for a many-core machine: sets corecast up from this working tree and
# records campaigns of real programs at 1, 2, 4, 6, 8, 12 and 16 cores (those the machine has),
# 3 repetitions, writing the campaign files and a summary to OUTDIR (within 8 minutes on 16
# cores). Needs only what a bare x86-64 Linux has: Python >= 3.11 with NumPy and SciPy, gcc, and
# ninja for the build program -- no network, no pip, no apt, no meson (kit.py says what it does
# without rich and matplotlib). Then: python3 bench/groundtruth/evaluate.py OUTDIR.
#
#   bench/groundtruth/run.sh OUTDIR [--quick] [--cores 1,2] [--reps N] [--programs a,b] [--budget S]
#
# PYTHON=/path/to/python3 picks the Python (default: python3 on PATH).
set -euo pipefail
started=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: $0 OUTDIR [--quick] [--cores LIST] [--reps N] [--programs LIST] [--budget SECONDS]" >&2
    exit 2
fi
out=$1
shift
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "kit: no $py on PATH" >&2; exit 2; }
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "kit: corecast needs Python >= 3.11 ($py is $("$py" --version 2>&1))" >&2; exit 2; }
command -v gcc >/dev/null || { echo "kit: gcc is needed to build the sync shim and the workloads" >&2; exit 2; }
mkdir -p "$out"
exec "$py" "$here/kit.py" --out "$out" --started "$started" "$@"
