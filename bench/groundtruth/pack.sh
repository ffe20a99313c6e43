#!/usr/bin/env bash
# The ground-truth kit in one command for a machine lent for a few minutes, whose results come
# back as a few files: describes the machine, runs the kit and its evaluation, and packs
# everything into RESULTS/groundtruth.tar.gz beside RESULTS/console.log, summary.txt,
# evaluate.txt and kit.log (five files; the campaigns only in the tarball).
#
#   bench/groundtruth/pack.sh RESULTS [BUDGET_S] [KIT OPTIONS ...]
#
# BUDGET_S (default 450) is the kit's --budget; the kit is killed 30 s after it, the evaluation
# gets 120 s. The work folder is a fresh one under $TMPDIR (removed at the end).
set -u
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: $0 RESULTS [BUDGET_S] [KIT OPTIONS ...]" >&2
    exit 2
fi
res=$1
budget=${2:-450}
shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$res" || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/corecast-gt.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
exec > >(tee "$res/console.log") 2>&1
echo "tree: $(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown)"
date -u; uname -a; echo "CPUs: $(nproc)"
echo "python3: $(command -v python3) $(python3 --version 2>&1)"
for t in gcc ninja xz zstd pigz sysbench memcached perf sort; do printf '%s: %s\n' "$t" "$(command -v "$t" || echo missing)"; done
lscpu 2>/dev/null | grep -E "^(Model name|Socket|Core|Thread|NUMA node|CPU\(s\)|L2|L3|CPU max MHz)"
grep Cpus_allowed_list /proc/self/status
PYTHONUNBUFFERED=1 timeout -k 10 "$((budget + 30))" "$here/run.sh" "$work/gt" --budget "$budget" "$@"
echo "kit exit status $?"
PYTHONUNBUFFERED=1 timeout -k 5 120 python3 "$here/evaluate.py" "$work/gt"
echo "evaluate exit status $?"
for f in summary.txt evaluate.txt kit.log; do [ -f "$work/gt/$f" ] && cp "$work/gt/$f" "$res/"; done
(cd "$work/gt" && tar czf "$res/groundtruth.tar.gz" --ignore-failed-read campaigns summary.json summary.txt \
    evaluate.json evaluate.txt kit.log 2>/dev/null)
ls -la "$res"
