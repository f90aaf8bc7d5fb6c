#!/usr/bin/env python3
"""Fixtures for mode on_disk's recall tests, written by Debian's FAISS (1.7.3):

    /usr/bin/python3 testdata/gen_ondisk.py

For each NAME in clustered_l2, clustered_ip (2000 vectors of dimension 32 drawn around
100 overlapping Gaussian cluster centres, IndexHNSWFlat M=8, efConstruction=100, L2 or inner product):

    testdata/ondisk/NAME.faiss   the index, as faiss.write_index writes it
    testdata/ondisk/NAME.json    50 queries (other draws around the same centres), FAISS's exact
                                 top-10 (IndexFlat over the index's own vectors: ids and distances),
                                 and FAISS's HNSW results and recall@10 at efSearch 16, 64 and 256
    testdata/ondisk/NAME.queries.fvecs, NAME.gt.ivecs   the same queries and exact ids, for the CLI

Recall figures here are FAISS's own; the tests hold on_disk's recall against them.
"""
import json
import os

import faiss
import numpy as np

from gen_queries import write_vecs  # .fvecs / .ivecs rows, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "ondisk")
N, D, NQ, K, CENTRES = 2000, 32, 50, 10, 100


def main():
    faiss.omp_set_num_threads(1)  # the graph is built the same way on every run
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(18)
    centres = rng.standard_normal((CENTRES, D)).astype("float32")
    xb = (centres[rng.integers(0, CENTRES, N)] + rng.standard_normal((N, D))).astype("float32")
    xq = (centres[rng.integers(0, CENTRES, NQ)] + rng.standard_normal((NQ, D))).astype("float32")
    for name, metric in (("clustered_l2", faiss.METRIC_L2), ("clustered_ip", faiss.METRIC_INNER_PRODUCT)):
        ix = faiss.IndexHNSWFlat(D, 8, metric)
        ix.hnsw.efConstruction = 100
        ix.add(xb)
        faiss.write_index(ix, os.path.join(OUT, name + ".faiss"))
        flat = faiss.IndexFlat(D, metric)
        flat.add(xb)
        ed, ei = flat.search(xq, K)
        out = {
            "fixture": name,
            "faiss_version": faiss.__version__,
            "metric": "L2" if metric == faiss.METRIC_L2 else "IP",
            "k": K,
            "queries": xq.tolist(),
            "exact": {"ids": ei.tolist(), "distances": ed.tolist()},
            "hnsw": [],
        }
        for ef in (16, 64, 256):
            ix.hnsw.efSearch = ef
            _, hi = ix.search(xq, K)
            recall = float(np.mean([len(set(hi[i]) & set(ei[i])) / K for i in range(NQ)]))
            out["hnsw"].append({"ef_search": ef, "ids": hi.tolist(), "recall": recall})
        write_vecs(os.path.join(OUT, name + ".queries.fvecs"), xq, "float32")
        write_vecs(os.path.join(OUT, name + ".gt.ivecs"), ei, "int32")
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(out, f)
        print(name, [(r["ef_search"], round(r["recall"], 3)) for r in out["hnsw"]])


if __name__ == "__main__":
    main()
