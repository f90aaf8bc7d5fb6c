#!/usr/bin/env bash
# Side-by-side storage benchmark: fio's 4 KiB O_DIRECT random-read IOPS at
# queue depth 64 and faiss-sidecar's backends on the same file, in one run.
#   bash bench/storage.sh [SIZE_GIB]   (default 4; needs fio: apt-get install -y fio)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v fio >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio; }
size_gib=${1:-4}
mkdir -p bench-data
file=bench-data/storage-${size_gib}g.bin
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" -ne $((size_gib << 30)) ]; then
  echo "writing $file ($size_gib GiB of random data)…" >&2
  head -c $((size_gib << 30)) /dev/urandom > "$file"
  sync "$file"
fi
go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar
bin=bench-data/faiss-sidecar
reads=${READS:-400000}

"$bin" bench storage "$file" --backend pread --cold --reads 1 >/dev/null # evicts
fio --name=qd64 --filename="$file" --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 \
    --runtime=15 --time_based --size=$((size_gib << 30)) --output-format=json > bench-data/fio-qd64.json
fio_iops=$(python3 -c "import json;print(json.load(open('bench-data/fio-qd64.json'))['jobs'][0]['read']['iops'])")
echo "fio randread 4k O_DIRECT io_uring iodepth=64: ${fio_iops} IOPS"

run() { "$bin" bench storage "$file" --json "$@"; }
py_field() { python3 -c "import json,sys;print(json.load(sys.stdin)['$1'])"; }
for cfg in "direct 64" "direct 1" "pread 64" "mmap 64" "pread 1" "mmap 1"; do
  set -- $cfg
  out=$(run --backend "$1" --inflight "$2" --cold --reads "$reads")
  rps=$(echo "$out" | py_field reads_per_s)
  dev=$(echo "$out" | py_field device_bytes_per_requested_byte)
  p99=$(echo "$out" | py_field p99_us)
  ratio=$(python3 -c "print('%.3f' % ($rps / $fio_iops))")
  printf "%-7s inflight=%-3s cold: %9.0f reads/s  = %s × fio QD64   p99 %8.1f µs   device bytes/requested %.3f\n" "$1" "$2" "$rps" "$ratio" "$p99" "$dev"
done
