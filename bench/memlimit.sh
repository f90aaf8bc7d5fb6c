#!/usr/bin/env bash
# Search under a real memory limit (cgroup v1), cold start each run: the
# index file is evicted from the page cache, then `faiss-sidecar bench` runs
# inside a memory cgroup limited to 1/2, 1/3 and 1/10 of the file size.
# Reports QPS, p50/p99, device bytes per query, recall, time to first query,
# the cgroup's peak memory and the vector cache's hit rate (on_disk: the
# share of the shortlist it served), per backend. SECS=0 measures each of the
# NQ queries' first run (bench --fresh); else queries repeat for SECS after
# an unmeasured pass over them.
#   bash bench/memlimit.sh [INDEX QUERIES GT]    (default: bench-data/fmnist.*)
# Needs root and the cgroup-v1 memory controller (/sys/fs/cgroup/memory).
set -euo pipefail
cd "$(dirname "$0")/.."
idx=${1:-bench-data/fmnist.faiss}
q=${2:-bench-data/fmnist.queries.fvecs}
gt=${3:-bench-data/fmnist.gt.ivecs}
secs=${SECS:-10}
measure="--duration ${secs}s" # after an unmeasured pass over the queries: repeats
[ "$secs" = 0 ] && measure=--fresh # each query's first run, once
# BIN: a binary to measure instead of this tree's (built into bench-data/).
if [ -n "${BIN:-}" ]; then
  bin=$(realpath "$BIN")
else
  go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar
  bin=$(realpath bench-data/faiss-sidecar)
fi
cg=/sys/fs/cgroup/memory/faiss-sidecar-bench-$$
size=$(stat -c %s "$idx")
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
# The device's limit in the same run: fio 4 KiB random reads at queue depth
# 64 on the index file itself (O_DIRECT, io_uring), 5 s. A query needing R
# device reads cannot beat IOPS / R.
command -v fio >/dev/null || apt-get install -y fio >/dev/null
iops=$(fio --name=r --filename="$idx" --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 \
  --runtime=5 --time_based --readonly --output-format=json 2>/dev/null | /usr/bin/python3 -c "import json,sys;print(int(json.load(sys.stdin)['jobs'][0]['read']['iops']))")
echo "fio 4 KiB random reads, queue depth 64, on $idx: $iops IOPS"
printf "%-6s %-28s %9s %9s %9s %12s %7s %7s %10s %10s %7s\n" limit backend QPS p50_us p99_us dev_B/query R recall first_ms peak_MiB vc_hit%
# FRACS: which fractions of the file to limit memory to; BACKENDS: which
# configurations (mmap, pread, direct: block caches of 40% of the limit;
# budget: the bounded-memory policy with --memory-budget of the limit less
# max(1/10 of it, 8 MiB), or BUDGET_PCT % of it when set; ondisk4x,
# ondisk8x, ondisk16x, ondisk32x (any level), ondisk: mode on_disk at that level (ondisk: auto) under the
# same budget, its guide built beforehand into bench-data/guides, outside
# the limit, as `quantize` or a first run would; for auto, the guide of
# the level auto picks under the budget); ondisk-first: on_disk auto
# without --memory-budget (bench plans under the limit's, less a sixteenth
# (8 to 64 MiB) and its queries, when that cannot hold the file), its guide
# built inside the limit by the measured run itself, into a fresh directory.
for frac in ${FRACS:-2 3 10}; do
  limit=$((size / frac))
  cache=$((limit * 4 / 10))
  # The budget leaves the rest of the limit to the binary's own pages and
  # the benchmark's query files: a tenth of it, at least 8 MiB.
  reserve=$((limit / 10 > 8 << 20 ? limit / 10 : 8 << 20))
  budget=$((limit - reserve))
  [ -n "${BUDGET_PCT:-}" ] && budget=$((limit * BUDGET_PCT / 100))
  for name in ${BACKENDS:-mmap pread direct budget}; do
    case $name in
      mmap) cfg="mmap" ;;
      pread|direct) cfg="$name --cache-bytes $cache" ;;
      budget) cfg="direct --memory-budget $budget ${BUDGET_FLAGS:-}" ;;
      ondisk-first) fresh=$(mktemp -d)
        cfg="direct --mode on_disk --compression auto --guide-dir $fresh" ;;
      ondisk*) level=${name#ondisk}; level=${level:-auto}
        cfg="direct --mode on_disk --compression $level --guide-dir bench-data/guides --memory-budget $budget"
        if [ "$level" = auto ]; then
          # The level auto picks under this budget: one query outside the
          # limit builds (or finds) and persists its guide.
          "$bin" bench "$idx" --queries "$q" --k 10 --max-queries 1 --duration 1ms --backend $cfg >/dev/null
        elif ! ls bench-data/guides/"$(basename "$idx")".*."$level".guide >/dev/null 2>&1; then
          "$bin" quantize "$idx" --compression "$level" --guide-dir bench-data/guides >/dev/null
        fi ;;
    esac
    "$bin" bench storage "$idx" --reads 1 --cold >/dev/null
    mkdir -p "$cg"
    echo "$limit" > "$cg/memory.limit_in_bytes"
    # The Go heap may grow to twice what is live before collecting: GOMEMLIMIT
    # makes the runtime collect before the cgroup's limit is reached.
    gml=$((limit * 6 / 10))
    case "$cfg" in *memory-budget*|*on_disk*) gml= ;; esac # the budget policy sets the runtime's limit itself
    out=$(GOMEMLIMIT=$gml sh -c "echo \$\$ > $cg/cgroup.procs; exec $bin bench $idx --queries $q --gt $gt --k 10 --ef-search 64 $measure --max-queries ${NQ:-200} --backend $cfg --json" 2>&1) || true
    peak=$(cat "$cg/memory.max_usage_in_bytes")
    [ "$name" = ondisk-first ] && rm -rf "$fresh"
    echo $$ > /sys/fs/cgroup/memory/cgroup.procs 2>/dev/null || true
    rmdir "$cg"
    echo "$out" | /usr/bin/python3 -c "
import json,sys
raw=sys.stdin.read()
try:
    d=json.loads(raw)
except Exception:
    print('%-6s %-28s failed: %s' % ('1/$frac', '$cfg'.split()[0], raw.strip()[:80])); sys.exit()
R = d.get('device_reads_per_query', 0) + d.get('rerank_reads_per_query', 0)
print('%-6s %-28s %9.0f %9.0f %9.0f %12.0f %7.1f %7.4f %10.2f %10.1f %7.1f' % ('1/$frac', '$name' + ('' if '$cfg'=='mmap' else (' budget=%dMiB' % ($budget>>20) if 'budget' in '$cfg' else ' no budget' if 'on_disk' in '$cfg' else ' cache=%dMiB' % ($cache>>20))), d['qps'], d['p50_us'], d['p99_us'], d['device_read_bytes_per_query'], R, d['recall'], (d['open_ms']*1000 + d['first_query_us'])/1000, $peak/2**20, d.get('vector_cache_hit_pct', 0) or 100*d.get('rerank_cache_hits_per_query', 0)/max(d.get('shortlist', 0), 1)))"
  done
done
