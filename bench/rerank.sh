#!/usr/bin/env bash
# Cold rerank I/O: every strategy at shortlists of 100, 500 and 1000 on a
# vector file of several GiB, beside fio's 4 KiB random-read IOPS at queue
# depth 64 on the same file, in one run.
#   bash bench/rerank.sh [N_VECTORS]   (default 1M × 1024-d: a 4 GiB .vec; needs fio)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
d=bench-data
mkdir -p $d
go build -o $d/faiss-sidecar ./cmd/faiss-sidecar
bin=$d/faiss-sidecar
fv=$d/rerank-1024d.fvecs vec=$d/rerank-1024d.vec
if [ ! -f $vec ]; then
  /usr/bin/python3 - "$fv" "$n" <<'PY'
import sys, numpy as np
path, n, d = sys.argv[1], int(sys.argv[2]), 1024
rng = np.random.default_rng(1)
with open(path, "wb") as f:
    for s in range(0, n, 20000):
        m = min(20000, n - s)
        a = np.empty((m, d + 1), dtype="<f4")
        a[:, 0] = np.frombuffer(np.int32(d).tobytes(), dtype="<f4")[0]
        a[:, 1:] = rng.standard_normal((m, d), dtype=np.float32)
        f.write(a.tobytes())
PY
  "$bin" export-vectors $fv $vec
  sync $vec $fv
fi
"$bin" bench storage $vec --reads 1 --cold >/dev/null
# The device's rate moves by 10-30% over minutes here, so each shortlist size
# gets its own floor, measured just before its strategies: fio's steady 4 KiB
# random-read IOPS at queue depth 64 (floor = N / IOPS), and fio reading the
# same kind of burst of N reads at the depth direct uses (--workers 128; the
# median of 21 bursts: fio reports whole milliseconds).
fio_iops() {
  fio --name=qd64 --filename=$vec --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 \
      --runtime=${FIO_SECS:-5} --time_based --output-format=json > $d/fio-rerank.json
  /usr/bin/python3 -c "import json;print(json.load(open('$d/fio-rerank.json'))['jobs'][0]['read']['iops'])"
}
fio_burst() {
  for seed in $(seq 21); do
    fio --name=burst --filename=$vec --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=128 \
        --number_ios="$1" --randseed="$seed" --output-format=json |
      /usr/bin/python3 -c "import json,sys;print(json.load(sys.stdin)['jobs'][0]['read']['runtime'])"
  done | sort -n | sed -n 11p
}
printf "%-6s %-22s %-6s %9s %9s %12s %14s %10s %10s %9s\n" N strategy layout p50_ms p99_ms vectors/s device_B/vec floor_ms fio_burst ×floor
for N in 100 500 1000; do
  iops=$(fio_iops)
  floor=$(/usr/bin/python3 -c "print('%.2f' % ($N / $iops * 1000))")
  burst=$(fio_burst $N)
  printf "# N=%d: fio QD64 %.0f IOPS, floor %s ms; fio burst of %d reads at QD128, median %s ms\n" $N "$iops" $floor $N "$burst"
  for cfg in "direct $vec" "mmap-willneed $vec" "pread $vec" "direct $fv"; do
    set -- $cfg
    "$bin" bench rerank --vectors "$2" --shortlist $N --trials 20 --strategy $1 --cold --json | /usr/bin/python3 -c "
import json,sys; r=json.load(sys.stdin)
print('%-6d %-22s %-6s %9.2f %9.2f %12.0f %14.0f %10s %10s %9.2f' % ($N, r['strategy'], r['layout'], r['p50_ms'], r['p99_ms'], r['vectors_per_s'], r['bytes_read_per_vector'], '$floor', '$burst', r['p50_ms'] / $floor))"
  done
done
