#!/usr/bin/env python3
"""Benchmark data for search, built with Debian's FAISS into bench-data/ (ignored).

    /usr/bin/python3 bench/gen_search_data.py

Also writes fmnist_sq8.faiss (IndexHNSWSQ QT_8bit) and fmnist_bin.faiss
(IndexBinaryHNSW over pixels > 64, queries in fmnist_bin.queries.bvecs) for
the rerank recall table (bench/rerank_recall.sh).

Writes, for each data set NAME (fmnist: Debian's dataset-fashion-mnist, 60k
train images × 784 as float32, queries from the 10k test images; clustered:
100k × 128 Gaussian clusters):
  bench-data/NAME.faiss          IndexHNSWFlat (M=16, efConstruction=100, L2)
  bench-data/NAME.queries.fvecs  1000 queries
  bench-data/NAME.gt.ivecs       exact top-100 ids (IndexFlatL2)
Needs: apt-get install -y python3-faiss python3-numpy dataset-fashion-mnist
"""
import gzip
import os
import struct
import sys
import time

import faiss
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data")


def idx_images(path):
    with gzip.open(path, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051, path
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols).astype("float32")


def write_vecs(path, a, dtype):
    """.fvecs / .ivecs / .bvecs: each row is an int32 dimension then the values."""
    a = np.ascontiguousarray(a, dtype=dtype)
    n, d = a.shape
    with open(path, "wb") as f:
        for row in a:
            f.write(struct.pack("<i", d))
            f.write(row.tobytes())


def build(name, xb, xq, M=16, efc=100):
    path = os.path.join(OUT, name + ".faiss")
    if os.path.exists(path):
        print("exists:", path, file=sys.stderr)
        return
    t0 = time.time()
    ix = faiss.IndexHNSWFlat(xb.shape[1], M)
    ix.hnsw.efConstruction = efc
    ix.add(xb)
    faiss.write_index(ix, path)
    flat = faiss.IndexFlatL2(xb.shape[1])
    flat.add(xb)
    _, gt = flat.search(xq, 100)
    write_vecs(os.path.join(OUT, name + ".queries.fvecs"), xq, "<f4")
    write_vecs(os.path.join(OUT, name + ".gt.ivecs"), gt, "<i4")
    print("%s: %d × %d, built in %.0fs, %d bytes" % (name, xb.shape[0], xb.shape[1], time.time() - t0, os.path.getsize(path)), file=sys.stderr)


def build_compact(xb, xq):
    """SQ8 and binary HNSW indexes of the same data, for rerank recall."""
    path = os.path.join(OUT, "fmnist_sq8.faiss")
    if not os.path.exists(path):
        t0 = time.time()
        ix = faiss.IndexHNSWSQ(xb.shape[1], faiss.ScalarQuantizer.QT_8bit, 16)
        ix.hnsw.efConstruction = 100
        ix.train(xb)
        ix.add(xb)
        faiss.write_index(ix, path)
        print("fmnist_sq8: built in %.0fs" % (time.time() - t0), file=sys.stderr)
    path = os.path.join(OUT, "fmnist_bin.faiss")
    if not os.path.exists(path):
        t0 = time.time()
        # 784 pixels -> 784 bits (pixel > 64), 98 bytes per image.
        bb = np.packbits(xb > 64, axis=1)
        bq = np.packbits(xq > 64, axis=1)
        ix = faiss.IndexBinaryHNSW(xb.shape[1], 16)
        ix.hnsw.efConstruction = 100
        ix.add(bb)
        faiss.write_index_binary(ix, path)
        write_vecs(os.path.join(OUT, "fmnist_bin.queries.bvecs"), bq, "u1")
        print("fmnist_bin: built in %.0fs" % (time.time() - t0), file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    base = "/usr/share/datasets/fashion-mnist/"
    xb = idx_images(base + "train-images-idx3-ubyte.gz")
    xq = idx_images(base + "t10k-images-idx3-ubyte.gz")[:1000]
    build("fmnist", xb, xq)
    build_compact(xb, xq)
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((1000, 128)).astype("float32") * 3
    xb = centers[rng.integers(0, 1000, 100_000)] + rng.standard_normal((100_000, 128)).astype("float32")
    xq = centers[rng.integers(0, 1000, 1000)] + rng.standard_normal((1000, 128)).astype("float32")
    build("clustered", xb.astype("float32"), xq.astype("float32"))


if __name__ == "__main__":
    main()
