#!/usr/bin/env python3
"""Times Debian FAISS's HNSW search (one thread) on an index file.

    /usr/bin/python3 bench/faiss_time.py INDEX QUERIES.fvecs GT.ivecs K EF [SECONDS]

Prints one JSON object: {"qps", "recall", "k", "ef_search", "faiss_version"}.
efSearch is set on the index object (no SearchParameters), k neighbors per
query, queries searched in one batch call (FAISS's fastest path), repeated
for at least SECONDS (default 3) after one warm-up pass.
"""
import json
import sys
import time

import faiss
import numpy as np


def read_vecs(path, dtype):
    a = np.fromfile(path, dtype="<i4")
    d = a[0]
    return a.reshape(-1, d + 1)[:, 1:].copy().view(dtype)


def main():
    index, queries, gt_path, k, ef = sys.argv[1:6]
    seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 3.0
    k, ef = int(k), int(ef)
    faiss.omp_set_num_threads(1)
    ix = faiss.read_index(index)
    faiss.downcast_index(ix).hnsw.efSearch = ef
    xq = read_vecs(queries, "<f4")
    gt = read_vecs(gt_path, "<i4")
    _, I = ix.search(xq, k)  # warm-up; recall from it
    recall = np.mean([len(set(I[i]) & set(gt[i, :k])) for i in range(len(xq))]) / k
    n, t0 = 0, time.perf_counter()
    while True:
        ix.search(xq, k)
        n += len(xq)
        el = time.perf_counter() - t0
        if el >= seconds:
            break
    print(json.dumps({"qps": n / el, "recall": float(recall), "k": k, "ef_search": ef, "faiss_version": faiss.__version__}))


if __name__ == "__main__":
    main()
