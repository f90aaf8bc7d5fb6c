#!/usr/bin/env python3
"""Writes N small OpenSearch-style segment files into bench-data/segments/
(ignored by git), for the many-small-indexes benchmarks (bench/small_indexes.sh).

    /usr/bin/python3 bench/gen_small_segments.py --n 10000

Each file is what the OpenSearch k-NN plugin writes for a segment of 1,000
vectors of 128 dimensions: an IndexIDMap over an IndexHNSWFlat (M 16,
efConstruction 100, efSearch 100: the plugin's defaults; l2) whose ids are
the segment's doc ids (0..1099 with gaps), then Lucene's 16-byte codec footer,
as testdata/gen_segments.py writes them.

Building 10,000 graphs with FAISS takes long, so only --distinct of them
(default 32) are built with FAISS; the other files are byte copies of those,
each its own file (its own inode), named seg_00000.faiss … seg_NNNNN.faiss.
Files already there with the right size are kept. Needs Debian's FAISS:
apt-get install -y python3-faiss python3-numpy.
"""
import argparse
import os
import shutil
import struct
import time
import zlib

import faiss
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=10_000, help="files to write")
ap.add_argument("--distinct", type=int, default=32, help="graphs built with FAISS; the rest are copies")
ap.add_argument("--vectors", type=int, default=1000)
ap.add_argument("--d", type=int, default=128)
ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data", "segments"))
ap.add_argument("--seed", type=int, default=37)
a = ap.parse_args()


def footer(data):
    body = data + bytes.fromhex("c02893e8") + b"\0\0\0\0"
    return body + struct.pack(">q", zlib.crc32(body) & 0xFFFFFFFF)


def segment(rng):
    centers = rng.standard_normal((8, a.d)).astype("float32") * 3
    xb = (centers[rng.integers(0, len(centers), a.vectors)] + rng.standard_normal((a.vectors, a.d))).astype("float32")
    ids = np.sort(rng.permutation(int(a.vectors * 1.1))[: a.vectors]).astype("int64")
    inner = faiss.IndexHNSWFlat(a.d, 16, faiss.METRIC_L2)
    inner.hnsw.efConstruction = 100
    inner.hnsw.efSearch = 100
    ix = faiss.IndexIDMap(inner)
    ix.add_with_ids(xb, ids)
    w = faiss.VectorIOWriter()
    faiss.write_index(ix, w)
    return footer(faiss.vector_to_array(w.data).tobytes())


out = os.path.abspath(a.out)
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(a.seed)
t0 = time.time()
distinct = []
for i in range(min(a.distinct, a.n)):
    path = os.path.join(out, "seg_%05d.faiss" % i)
    data = segment(rng)  # always built, so the seed gives the same files
    if not (os.path.exists(path) and os.path.getsize(path) == len(data)):
        with open(path, "wb") as f:
            f.write(data)
    distinct.append(path)
built = time.time() - t0
for i in range(len(distinct), a.n):
    path = os.path.join(out, "seg_%05d.faiss" % i)
    src = distinct[i % len(distinct)]
    if not (os.path.exists(path) and os.path.getsize(path) == os.path.getsize(src)):
        shutil.copyfile(src, path)
print("wrote %d segments of %d x %d into %s (%d built with FAISS in %.1fs, the rest copies), %d bytes each"
      % (a.n, a.vectors, a.d, out, len(distinct), built, os.path.getsize(distinct[0])))
