#!/usr/bin/env python3
"""Benchmark data for search, built with Debian's FAISS into bench-data/ (ignored).

    /usr/bin/python3 bench/gen_search_data.py

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


def main():
    os.makedirs(OUT, exist_ok=True)
    base = "/usr/share/datasets/fashion-mnist/"
    build("fmnist", idx_images(base + "train-images-idx3-ubyte.gz"), idx_images(base + "t10k-images-idx3-ubyte.gz")[:1000])
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((1000, 128)).astype("float32") * 3
    xb = centers[rng.integers(0, 1000, 100_000)] + rng.standard_normal((100_000, 128)).astype("float32")
    xq = centers[rng.integers(0, 1000, 1000)] + rng.standard_normal((1000, 128)).astype("float32")
    build("clustered", xb.astype("float32"), xq.astype("float32"))


if __name__ == "__main__":
    main()
