#!/usr/bin/env python3
"""Writes query files for the demo fixture (testdata/fixtures/opensearch_0_165_vec.faiss,
the index `serve` embeds) so the README's `search` and `bench` examples run as written:

    testdata/queries/opensearch_0_165_vec.fvecs     50 queries, d=20 (.fvecs)
    testdata/queries/opensearch_0_165_vec.gt.ivecs  their exact top-10 external ids (.ivecs, for bench --gt)
    testdata/queries/opensearch_0_165_vec.json      what FAISS itself reports: k, and its HNSW's recall@k
                                                    at the stored efSearch against that ground truth

Run with Debian's FAISS (1.7.3):
    /usr/bin/python3 testdata/gen_queries.py

The ground truth is FAISS's exact search (IndexFlatL2 over the index's own vectors),
translated to external ids through the index's id_map, never computed by faiss-sidecar.
"""
import json
import os

import faiss
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
INDEX = os.path.join(HERE, "fixtures", "opensearch_0_165_vec.faiss")
OUT = os.path.join(HERE, "queries")
NQ, K = 50, 10


def write_vecs(path, a, dtype):
    a = np.ascontiguousarray(a, dtype=dtype)
    n, d = a.shape
    rows = np.empty((n, d + 1), dtype=dtype)
    rows.view("<i4")[:, 0] = d
    rows[:, 1:] = a
    rows.tofile(path)


def main():
    ix = faiss.read_index(INDEX)  # the FAISS stream; the 16-byte Lucene footer after it is not read
    idmap = faiss.downcast_index(ix)
    hnsw = faiss.downcast_index(idmap.index)
    ids = faiss.vector_to_array(idmap.id_map)
    xb = hnsw.storage.reconstruct_n(0, hnsw.ntotal)
    assert xb.shape == (400, 20), xb.shape

    # Queries near the data, as real ones are: a data vector plus noise.
    rng = np.random.default_rng(20261201)
    xq = (xb[rng.integers(0, len(xb), NQ)] + rng.standard_normal((NQ, xb.shape[1]))).astype("float32")

    flat = faiss.IndexFlatL2(xb.shape[1])
    flat.add(xb)
    _, gt_labels = flat.search(xq, K)
    gt = ids[gt_labels]

    _, got = ix.search(xq, K)  # FAISS's own HNSW at the stored efSearch, external ids
    recall = float(np.mean([len(set(got[i]) & set(gt[i])) for i in range(NQ)]) / K)

    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, "opensearch_0_165_vec")
    write_vecs(base + ".fvecs", xq, "<f4")
    write_vecs(base + ".gt.ivecs", gt, "<i4")
    with open(base + ".json", "w") as f:
        json.dump({"index": "fixtures/opensearch_0_165_vec.faiss", "queries": NQ, "d": int(xb.shape[1]), "k": K,
                   "ef_search_stored": int(hnsw.hnsw.efSearch), "faiss_hnsw_recall": recall}, f, indent=1)
        f.write("\n")
    print(f"wrote {base}.fvecs, .gt.ivecs, .json; FAISS HNSW recall@{K} at efSearch {hnsw.hnsw.efSearch}: {recall:.3f}")


if __name__ == "__main__":
    main()
