#!/usr/bin/env python3
"""Writes testdata/segments/: the segment files of two OpenSearch-style shards,
written by real FAISS, and FAISS's own answers on them (segments.json).

Run with Debian's FAISS (1.7.3):
    apt-get install -y python3-faiss python3-numpy
    /usr/bin/python3 testdata/gen_segments.py

The OpenSearch k-NN plugin writes one file per Lucene segment and vector
field, NAME = _<segment>_<codec-version>_<field>.faiss: an IndexIDMap over an
IndexHNSWFlat whose ids are the segment's doc ids (0..maxDoc-1, with gaps where
a document has no vector), followed by Lucene's 16-byte codec footer.

shard "l2": segments _0.._7 (l2, d=16, 40..300 vectors each), and _8, the
result of merging _0, _1 and _2: their vectors in one new segment, doc ids
renumbered in order (Lucene's merge keeps segment order).
shard "ip": segments _0.._2 of an innerproduct field.

segments.json holds, per shard, the queries and for every segment FAISS's
search (k, the stored efSearch), with and without a per-segment allow-list of
doc ids (IDSelectorBatch through SearchParametersHNSW); the merged answers a
multi-target search must give are left to the tests, which merge these
per-segment answers by the documented rule.
"""
import json
import os
import struct
import zlib

import faiss
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "segments")
rng = np.random.default_rng(20261203)
D = 16
EF = 24


def clustered(n, centers):
    a = centers[rng.integers(0, len(centers), n)]
    return (a + rng.standard_normal((n, D)).astype("float32")).astype("float32")


def footer(data):
    body = data + bytes.fromhex("c02893e8") + b"\0\0\0\0"
    return body + struct.pack(">q", zlib.crc32(body) & 0xFFFFFFFF)


def write_segment(path, xb, ids, metric):
    inner = faiss.IndexHNSWFlat(D, 8, metric)
    inner.hnsw.efConstruction = 40
    inner.hnsw.efSearch = EF
    ix = faiss.IndexIDMap(inner)
    ix.add_with_ids(xb, ids.astype("int64"))
    w = faiss.VectorIOWriter()
    faiss.write_index(ix, w)
    open(path, "wb").write(footer(faiss.vector_to_array(w.data).tobytes()))
    return ix


def fl(row):
    return [float(v) for v in row]


def search(ix, q, k, allowed):
    """FAISS's answer of one segment: ids are doc ids (the id map applied)."""
    inner = faiss.downcast_index(ix.index)
    idmap = faiss.vector_to_array(ix.id_map)
    if allowed is None:
        dist, lab = inner.search(q, k)
    else:
        internal = np.nonzero(np.isin(idmap, allowed))[0].astype("int64")
        params = faiss.SearchParametersHNSW(efSearch=EF, sel=faiss.IDSelectorBatch(internal))
        dist, lab = inner.search(q, k, params=params)
    out_ids, out_d = [], []
    for drow, lrow in zip(dist, lab):
        keep = lrow >= 0
        out_ids.append(idmap[lrow[keep]].tolist())
        out_d.append(fl(drow[keep]))
    return {"ids": out_ids, "distances": out_d}


def shard(name, metric, sizes, merged_from):
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    centers = rng.standard_normal((6, D)).astype("float32") * 3
    segs, vecs_of = {}, {}
    for s, n in enumerate(sizes):
        xb = clustered(n, centers)
        # Doc ids with gaps: about one doc in ten has no vector.
        ids = np.sort(rng.permutation(int(n * 1.1))[:n])
        vecs_of[s] = (xb, ids)
    if merged_from:
        xs, off = [], 0
        new_ids = []
        for s in merged_from:
            xb, ids = vecs_of[s]
            xs.append(xb)
            new_ids.append(ids + off)
            off += int(ids.max()) + 1
        vecs_of[len(sizes)] = (np.vstack(xs), np.concatenate(new_ids))
    q = clustered(12, centers)
    q[:2] = vecs_of[0][0][:2]  # exact copies: distance 0
    res = {"metric": "l2" if metric == faiss.METRIC_L2 else "innerproduct", "d": D, "ef_search": EF,
           "queries": [fl(r) for r in q], "merged_from": merged_from, "segments": {}}
    for s, (xb, ids) in vecs_of.items():
        seg = "_%d_165_my_vector" % s
        ix = write_segment(os.path.join(OUT, name, seg + ".faiss"), xb, ids, metric)
        allowed = np.sort(rng.choice(ids, size=max(1, len(ids) // 4), replace=False))
        res["segments"][seg] = {
            "ntotal": int(len(ids)),
            "doc_ids": ids.tolist(),
            "allow": allowed.tolist(),
            "k10": search(ix, q, 10, None),
            "k10_allow": search(ix, q, 10, allowed),
        }
    res["faiss_version"] = faiss.__version__
    return res


def main():
    out = {"l2": shard("l2", faiss.METRIC_L2, [120, 300, 40, 200, 80, 150, 60, 250], [0, 1, 2]),
           "ip": shard("ip", faiss.METRIC_INNER_PRODUCT, [100, 150, 70], [])}
    with open(os.path.join(OUT, "segments.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
