#!/usr/bin/env bash
# Side-by-side search speed of two faiss-sidecar binaries in one run: for each
# data set of bench-data/ (bench/gen_search_data.py), loading mode and
# ef_search, runs `bench` of BASE then NEW alternately ROUNDS times on one
# pinned core and prints the new/base QPS ratio: median (range).
#
#   bash bench/ab_cli.sh OLD_BINARY NEW_BINARY
#   ROUNDS=5 DURATION=3s DATASETS="fmnist" EFS="16 64" bash bench/ab_cli.sh /tmp/old ./faiss-sidecar
set -euo pipefail
base=$(realpath "${1:?usage: bench/ab_cli.sh BASE_BINARY NEW_BINARY}")
new=$(realpath "${2:?usage: bench/ab_cli.sh BASE_BINARY NEW_BINARY}")
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
dur=${DURATION:-2s}
cpu=${CPU:-1}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ds in ${DATASETS:-fmnist clustered}; do
	for mode in full memory_efficient; do
		for ef in ${EFS:-16 64 256}; do
			for r in $(seq "$rounds"); do
				for arm in base new; do
					bin=$base
					[ $arm = new ] && bin=$new
					qps=$(taskset -c "$cpu" "$bin" bench "bench-data/$ds.faiss" --queries "bench-data/$ds.queries.fvecs" \
						--k 10 --ef-search "$ef" --mode "$mode" --threads 1 --duration "$dur" --json |
						/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["qps"])')
					echo "$ds $mode $ef $r $arm $qps" >>"$out"
				done
			done
		done
	done
done
/usr/bin/python3 - "$out" <<'PY'
import collections, statistics, sys
q = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    ds, mode, ef, r, arm, v = line.split()
    q[(ds, mode, int(ef))].setdefault(r, {})[arm] = float(v)
print(f"{'data':10s} {'mode':17s} {'ef':>4s} {'base QPS':>9s} {'new QPS':>9s}  new/base median (range)")
for (ds, mode, ef), rs in q.items():
    ratios = sorted(v["new"] / v["base"] for v in rs.values())
    b = statistics.median(v["base"] for v in rs.values()); n = statistics.median(v["new"] for v in rs.values())
    print(f"{ds:10s} {mode:17s} {ef:4d} {b:9.0f} {n:9.0f}  {statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")
PY
