#!/bin/bash
# Side-by-side speed of the working tree against a base revision, in one
# run: builds the test binary of package PKG (default ./hnswsearch) of each,
# runs the benchmarks BENCH_REGEX names (default BenchmarkSearchBenchData over
# bench-data/, made by bench/gen_search_data.py, full mode and mmap)
# alternately PAIRS times, and prints per benchmark the new/base speed ratio
# (base ns/op over new): median (range) over the pairs.
#
#   bash bench/ab_search.sh BASE_REV [BENCH_REGEX]
#   PAIRS=5 BENCHTIME=2s bash bench/ab_search.sh HEAD~1 'SearchBenchData/ds=fmnist/backend=(memory|mmap)'
#   PKG=./httpapi bash bench/ab_search.sh HEAD~1 'HTTPOverhead'
set -euo pipefail
base=${1:?base revision}
re=${2:-'SearchBenchData/ds=.*/backend=(memory|mmap)'}
pairs=${PAIRS:-3}
bt=${BENCHTIME:-1s}
pkg=${PKG:-./hnswsearch}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
ln -s "$root/bench-data" "$tmp/base/bench-data"
(cd "$tmp/base" && go test -c -o "$tmp/base.test" "$pkg")
(cd "$root" && go test -c -o "$tmp/new.test" "$pkg")
for i in $(seq "$pairs"); do
	for arm in base new; do
		(cd "$root/$pkg" && "$tmp/$arm.test" -test.run='^$' -test.bench="$re" -test.benchtime="$bt") |
			awk -v arm=$arm -v i=$i '/^Benchmark/ {print arm, i, $1, $3}' >>"$tmp/out"
	done
done
/usr/bin/python3 - "$tmp/out" <<'EOF'
import collections, re, statistics, sys
ns = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    arm, i, name, v = line.split()
    ns[re.sub(r"-\d+$", "", name)][arm][i] = float(v)
for name, arms in ns.items():
    r = sorted(arms["base"][i] / arms["new"][i] for i in arms["new"] if i in arms["base"])
    print(f"{name:70s} new/base speed {statistics.median(r):.3f} ({r[0]:.3f}-{r[-1]:.3f}), {len(r)} pairs")
EOF
