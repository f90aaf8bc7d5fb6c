#!/usr/bin/env python3
"""Builds large HNSW indexes with real FAISS into bench-data/ (ignored by git).

    /usr/bin/python3 bench/gen_hnsw.py --n 1000000 --d 32 --M 16 --out bench-data/hnsw_1m_d32.faiss

Vectors are clustered Gaussian data (fixed seed), so graphs look like real ones.
Needs Debian's FAISS: apt-get install -y python3-faiss python3-numpy.
"""
import argparse
import os
import time

import faiss
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=1_000_000)
ap.add_argument("--d", type=int, default=32)
ap.add_argument("--M", type=int, default=16)
ap.add_argument("--ef-construction", type=int, default=40)
ap.add_argument("--metric", choices=["l2", "ip"], default="l2")
ap.add_argument("--out", required=True)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--queries", type=int, default=0, help="also write OUT.queries.fvecs and exact top-100 OUT.gt.ivecs")
a = ap.parse_args()

rng = np.random.default_rng(a.seed)
centers = rng.standard_normal((max(1, a.n // 1000), a.d)).astype("float32") * 4
flat = faiss.IndexFlatL2(a.d) if a.queries else None
metric = faiss.METRIC_L2 if a.metric == "l2" else faiss.METRIC_INNER_PRODUCT
ix = faiss.IndexHNSWFlat(a.d, a.M, metric)
ix.hnsw.efConstruction = a.ef_construction
t0 = time.time()
for start in range(0, a.n, 100_000):
    m = min(100_000, a.n - start)
    x = centers[rng.integers(0, len(centers), m)] + rng.standard_normal((m, a.d)).astype("float32")
    ix.add(x.astype("float32"))
    if flat is not None:
        flat.add(x.astype("float32"))
os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
faiss.write_index(ix, a.out)
if flat is not None:
    xq = (centers[rng.integers(0, len(centers), a.queries)] + rng.standard_normal((a.queries, a.d))).astype("float32")
    _, gt = flat.search(xq, 100)
    base = a.out[:-len(".faiss")] if a.out.endswith(".faiss") else a.out
    for path, arr, dt in [(base + ".queries.fvecs", xq, "<f4"), (base + ".gt.ivecs", gt.astype("int32"), "<i4")]:
        with open(path, "wb") as f:
            for row in arr:
                f.write(np.int32(arr.shape[1]).tobytes())
                f.write(row.astype(dt).tobytes())
print("wrote %s: n=%d d=%d M=%d in %.1fs, %d bytes" % (a.out, a.n, a.d, a.M, time.time() - t0, os.path.getsize(a.out)))
