#!/usr/bin/env python3
"""Writes the FAISS fixtures in testdata/fixtures/ with real FAISS and, beside
each NAME.faiss, NAME.json: what FAISS itself reports about the index it wrote.

Run with Debian's FAISS (1.7.3):
    apt-get install -y python3-faiss python3-numpy
    /usr/bin/python3 testdata/gen_fixtures.py

FAISS's multi-threaded HNSW build makes each full run's graphs differ; to add
only the NAME.index_ef.json references (searches with index.hnsw.efSearch
set, computed from the existing .faiss files, the same bytes every run):
    /usr/bin/python3 testdata/gen_fixtures.py --index-ef-only

Every expected value in the JSON files is read back from the live FAISS
object (header fields, HNSW arrays, id maps, SQ parameters, code bytes), never
computed by faiss-sidecar. Two fixtures (sq_bf16, sq_8bit_direct_signed) use SQ
types that FAISS 1.7.3 cannot write; they are made by changing only the qtype
field of a FAISS-written file whose layout is identical (fp16 resp.
8bit_direct), and their JSON says so ("derived_from").
"""
import hashlib
import json
import os
import struct
import sys
import zlib

import faiss
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
rng = np.random.default_rng(20261129)

QTYPES = {
    "8bit": faiss.ScalarQuantizer.QT_8bit,
    "4bit": faiss.ScalarQuantizer.QT_4bit,
    "8bit_uniform": faiss.ScalarQuantizer.QT_8bit_uniform,
    "4bit_uniform": faiss.ScalarQuantizer.QT_4bit_uniform,
    "fp16": faiss.ScalarQuantizer.QT_fp16,
    "8bit_direct": faiss.ScalarQuantizer.QT_8bit_direct,
    "6bit": faiss.ScalarQuantizer.QT_6bit,
}


def vecs(n, d, clustered=True):
    if not clustered:
        return rng.standard_normal((n, d)).astype("float32")
    centers = rng.standard_normal((max(1, n // 50), d)).astype("float32") * 3
    a = centers[rng.integers(0, len(centers), n)]
    return (a + rng.standard_normal((n, d)).astype("float32")).astype("float32")


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def arr(v):
    return faiss.vector_to_array(v)


def describe_hnsw(h):
    levels = arr(h.levels)
    cum = arr(h.cum_nneighbor_per_level)
    hist = np.bincount(levels - 1, minlength=1).tolist() if levels.size else []
    return {
        "assign_probas": [float(p) for p in arr(h.assign_probas)],
        "cum_nneighbor_per_level": cum.tolist(),
        "levels": levels.tolist(),
        "offsets": arr(h.offsets).tolist(),
        "neighbors_count": int(arr(h.neighbors).size),
        "neighbors_sha256": sha(arr(h.neighbors).astype("<i4").tobytes()),
        "entry_point": int(h.entry_point),
        "max_level": int(h.max_level),
        "ef_construction": int(h.efConstruction),
        "ef_search": int(h.efSearch),
        "upper_beam": int(h.upper_beam),
        "M": int(h.nb_neighbors(1)),
        "levels_histogram": hist,
        "unreachable": unreachable(levels, arr(h.offsets), cum, arr(h.neighbors), int(h.entry_point)),
    }


def unreachable(levels, offsets, cum, nb, ep):
    """Nodes no link path (any level) leads to from the entry point."""
    n = len(levels)
    if n == 0:
        return 0
    seen = np.zeros(n, dtype=bool)
    seen[ep] = True
    stack = [ep]
    while stack:
        u = stack.pop()
        for v in nb[offsets[u]:offsets[u + 1]]:
            if v >= 0 and not seen[v]:
                seen[v] = True
                stack.append(v)
    return int(n - seen.sum())


def describe(index, fourcc):
    """Header fields and array contents of a live FAISS object."""
    binary = fourcc.startswith("IB")
    out = {"fourcc": fourcc, "d": int(index.d), "ntotal": int(index.ntotal),
           "is_trained": bool(index.is_trained)}
    if binary:
        out["code_size"] = int(index.code_size)
    else:
        out["metric_type"] = int(index.metric_type)
        out["metric_arg"] = float(index.metric_arg)
    return out


def flat_codes(index):
    return arr(index.codes).tobytes()


def tree(index, fourcc, child=None):
    """Builds the expected JSON tree; child is (index, fourcc, subchild)."""
    t = describe(index, fourcc)
    if fourcc in ("IxF2", "IxFI", "IxFl"):
        b = flat_codes(index)
        t["codes_bytes"] = len(b)
        t["codes_sha256"] = sha(b)
    elif fourcc == "IxSQ":
        sq = index.sq
        t["sq"] = {"qtype": int(sq.qtype), "rangestat": int(sq.rangestat),
                   "rangestat_arg": float(sq.rangestat_arg), "d": int(sq.d),
                   "code_size": int(sq.code_size),
                   "trained": [float(x) for x in arr(sq.trained)]}
        b = arr(index.codes).tobytes()
        t["codes_bytes"] = len(b)
        t["codes_sha256"] = sha(b)
    elif fourcc == "IBxF":
        b = arr(index.xb).tobytes()
        t["codes_bytes"] = len(b)
        t["codes_sha256"] = sha(b)
    if fourcc in ("IHNf", "IHNs", "IBHf"):
        t["hnsw"] = describe_hnsw(index.hnsw)
    if fourcc in ("IxMp", "IxM2", "IBMp", "IBM2"):
        ids = arr(index.id_map)
        t["id_map"] = ids.tolist()
    if child is not None:
        t["child"] = tree(*child)
    return t


def save(name, index, expected, binary=False, extra=None):
    path = os.path.join(OUT, name + ".faiss")
    if binary:
        faiss.write_index_binary(index, path)
    else:
        faiss.write_index(index, path)
    data = open(path, "rb").read()
    expected = dict(expected)
    expected["file_size"] = len(data)
    expected["faiss_version"] = faiss.__version__
    if extra:
        expected.update(extra)
    write_json(name, expected)
    return data


def write_json(name, obj):
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def hnsw_children(index, binary=False):
    if binary:
        return faiss.downcast_IndexBinary(index.storage)
    return faiss.downcast_index(index.storage)


def flat_fourcc(metric):
    return {faiss.METRIC_L2: "IxF2", faiss.METRIC_INNER_PRODUCT: "IxFI"}.get(metric, "IxFl")


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith((".faiss", ".json")):
            os.remove(os.path.join(OUT, f))

    # --- flat ---
    for name, metric, arg in [("flat_l2", faiss.METRIC_L2, None), ("flat_ip", faiss.METRIC_INNER_PRODUCT, None),
                              ("flat_l1", faiss.METRIC_L1, None), ("flat_lp", faiss.METRIC_Lp, 3.0)]:
        ix = faiss.IndexFlat(16, metric)
        if arg is not None:
            ix.metric_arg = arg
        ix.add(vecs(200, 16))
        save(name, ix, tree(ix, flat_fourcc(metric)))

    # --- scalar quantizers (odd d exercises partial nibbles / 6-bit groups) ---
    for qname, qt in QTYPES.items():
        for metric, suffix in [(faiss.METRIC_L2, ""), (faiss.METRIC_INNER_PRODUCT, "_ip")]:
            ix = faiss.IndexScalarQuantizer(15, qt, metric)
            x = vecs(200, 15)
            if qname == "8bit_direct":
                x = np.floor(np.abs(x) * 40).clip(0, 255).astype("float32")
            ix.train(x)
            ix.add(x)
            save("sq_" + qname + suffix, ix, tree(ix, "IxSQ"))

    # --- HNSW flat ---
    specs = [
        ("hnsw_flat_l2", 32, 500, 16, faiss.METRIC_L2, None),
        ("hnsw_flat_ip", 24, 300, 8, faiss.METRIC_INNER_PRODUCT, None),
        ("hnsw_flat_ef40", 12, 400, 4, faiss.METRIC_L2, 40),
        ("hnsw_flat_large", 64, 3000, 16, faiss.METRIC_L2, None),
        ("hnsw_empty", 8, 0, 16, faiss.METRIC_L2, None),
        ("hnsw_one", 8, 1, 16, faiss.METRIC_L2, None),
    ]
    for name, d, n, M, metric, ef in specs:
        ix = faiss.IndexHNSWFlat(d, M, metric)
        if ef is not None:
            ix.hnsw.efSearch = ef
        if n:
            ix.add(vecs(n, d))
        st = hnsw_children(ix)
        save(name, ix, tree(ix, "IHNf", (st, flat_fourcc(metric))))

    # --- HNSW over SQ ---
    for qname, qt in QTYPES.items():
        metric = faiss.METRIC_INNER_PRODUCT if qname in ("4bit", "fp16") else faiss.METRIC_L2
        d = 16
        ix = faiss.IndexHNSWSQ(d, qt, 8, metric)
        x = vecs(300, d)
        if qname == "8bit_direct":
            x = np.floor(np.abs(x) * 40).clip(0, 255).astype("float32")
        ix.train(x)
        ix.add(x)
        st = hnsw_children(ix)
        save("hnsw_sq_" + qname, ix, tree(ix, "IHNs", (st, "IxSQ")))

    # --- id maps ---
    for name, cls, fourcc in [("idmap_hnsw", faiss.IndexIDMap, "IxMp"), ("idmap2_hnsw", faiss.IndexIDMap2, "IxM2")]:
        inner = faiss.IndexHNSWFlat(20, 8)
        ix = cls(inner)
        ids = rng.permutation(100000)[:400].astype("int64")
        ix.add_with_ids(vecs(400, 20), ids)
        save(name, ix, tree(ix, fourcc, (inner, "IHNf", (hnsw_children(inner), "IxF2"))))
    inner = faiss.IndexFlatL2(8)
    ix = faiss.IndexIDMap(inner)
    ix.add_with_ids(vecs(50, 8), np.arange(1000, 1050).astype("int64"))
    save("idmap_flat", ix, tree(ix, "IxMp", (inner, "IxF2")))

    # --- binary ---
    bx = rng.integers(0, 256, (300, 8)).astype("uint8")
    ix = faiss.IndexBinaryFlat(64)
    ix.add(bx[:200])
    save("bin_flat", ix, tree(ix, "IBxF"), binary=True)
    ix = faiss.IndexBinaryHNSW(64, 8)
    ix.add(bx)
    save("bin_hnsw", ix, tree(ix, "IBHf", (hnsw_children(ix, True), "IBxF")), binary=True)
    for name, cls, fourcc in [("bin_idmap_hnsw", faiss.IndexBinaryIDMap, "IBMp"),
                              ("bin_idmap2_hnsw", faiss.IndexBinaryIDMap2, "IBM2")]:
        inner = faiss.IndexBinaryHNSW(64, 8)
        ix = cls(inner)
        ix.add_with_ids(bx, (rng.permutation(5000)[:300] + 7).astype("int64"))
        save(name, ix, tree(ix, fourcc, (inner, "IBHf", (hnsw_children(inner, True), "IBxF"))), binary=True)

    # --- the worked example of docs/faiss-format.md §5 ---
    inner = faiss.IndexHNSWFlat(2, 2)
    ix = faiss.IndexIDMap(inner)
    ix.add_with_ids(np.array([[0, 0], [1, 0], [0, 2]], dtype="float32"), np.array([10, 20, 30], dtype="int64"))
    save("worked_example", ix, tree(ix, "IxMp", (inner, "IHNf", (hnsw_children(inner), "IxF2"))))

    # --- OpenSearch k-NN style: FAISS bytes + 16-byte Lucene codec footer ---
    def with_footer(name, src):
        data = open(os.path.join(OUT, src + ".faiss"), "rb").read()
        body = data + bytes.fromhex("c02893e8") + b"\0\0\0\0"
        crc = zlib.crc32(body) & 0xFFFFFFFF
        out = body + struct.pack(">q", crc)
        open(os.path.join(OUT, name + ".faiss"), "wb").write(out)
        exp = json.load(open(os.path.join(OUT, src + ".json")))
        exp.update(file_size=len(out), faiss_size=len(data), lucene_footer={"crc32": crc}, copied_from=src)
        write_json(name, exp)
    with_footer("opensearch_0_165_vec", "idmap_hnsw")
    with_footer("opensearch_0_165_bin", "bin_idmap_hnsw")

    # --- SQ types newer than 1.7.3: same layout as a 1.7.3 type, qtype field patched ---
    def patched(name, src, new_qtype):
        data = bytearray(open(os.path.join(OUT, src + ".faiss"), "rb").read())
        # IxSQ: fourcc(4) + header(33, metric L2/IP has no metric_arg) -> qtype i32
        assert data[:4] == b"IxSQ"
        old = struct.unpack_from("<i", data, 37)[0]
        exp = json.load(open(os.path.join(OUT, src + ".json")))
        assert old == exp["sq"]["qtype"]
        struct.pack_into("<i", data, 37, new_qtype)
        open(os.path.join(OUT, name + ".faiss"), "wb").write(bytes(data))
        exp["sq"]["qtype"] = new_qtype
        exp["derived_from"] = src
        write_json(name, exp)
    patched("sq_bf16", "sq_fp16", 7)
    patched("sq_8bit_direct_signed", "sq_8bit_direct", 8)

    # --- types we do not serve (for the "unsupported" errors) ---
    q = faiss.IndexFlatL2(8)
    ivf = faiss.IndexIVFFlat(q, 8, 4)
    x = vecs(200, 8)
    ivf.train(x)
    ivf.add(x)
    faiss.write_index(ivf, os.path.join(OUT, "unsupported_ivf.faiss"))
    pq = faiss.IndexPQ(8, 2, 4)
    pq.train(x)
    faiss.write_index(pq, os.path.join(OUT, "unsupported_pq.faiss"))
    write_json("unsupported_ivf", {"unsupported": "IwFl"})
    write_json("unsupported_pq", {"unsupported": "IxPq"})

    # --- fixtures only for search semantics ---
    # Tie-heavy integer grid (L2 and IP): exact ties everywhere.
    for name, metric in [("hnsw_ties_l2", faiss.METRIC_L2), ("hnsw_ties_ip", faiss.METRIC_INNER_PRODUCT)]:
        ix = faiss.IndexHNSWFlat(4, 8, metric)
        ix.add(rng.integers(0, 4, (400, 4)).astype("float32"))
        save(name, ix, tree(ix, "IHNf", (hnsw_children(ix), flat_fourcc(metric))))
    # upper_beam = 2: FAISS 1.7.3's beam search variant (removed in 1.9).
    ix = faiss.IndexHNSWFlat(8, 8)
    ix.add(vecs(300, 8))
    ix.hnsw.upper_beam = 2
    save("hnsw_beam2", ix, tree(ix, "IHNf", (hnsw_children(ix), "IxF2")))

    search_fixtures()
    index_ef_fixtures()

    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("wrote %d files, %d bytes, FAISS %s" % (len(os.listdir(OUT)), total, faiss.__version__), file=sys.stderr)


def fl(x):
    """float32 values as JSON numbers (float64 repr round-trips exactly)."""
    return [float(v) for v in x]


def stats_reset():
    faiss.cvar.hnsw_stats.reset()


def stats_get():
    st = faiss.cvar.hnsw_stats
    return {"n1": int(st.n1), "n2": int(st.n2), "n3": int(st.n3)}


def hnsw_search(inner, q, k, ef, allowed, default_ef):
    """inner.search with FAISS's hnsw_stats of that search: plain when
    neither a per-query ef nor a selector is given, else through
    SearchParametersHNSW (efSearch = ef, or default_ef with a selector)."""
    stats_reset()
    if allowed is None and ef is None:
        D, I = inner.search(q, k)
    else:
        kw = {"efSearch": int(ef if ef is not None else default_ef)}
        if allowed is not None:
            kw["sel"] = faiss.IDSelectorBatch(allowed.astype("int64"))
        D, I = inner.search(q, k, params=faiss.SearchParametersHNSW(**kw))
    return D, I, stats_get()


def search_fixtures():
    """FAISS 1.7.3's own search results for the HNSW fixtures: NAME.search.json.

    Each run is one configuration: k, ef_search (None: the stored efSearch and
    no SearchParameters; a number: SearchParametersHNSW(efSearch=...)), and an
    optional allow-list given as external ids (FAISS gets an IDSelectorBatch
    of the internal ids, searching the inner index of an id map and
    translating ids through id_map exactly as IndexIDMap does, since 1.7.3's
    IndexIDMap rejects search parameters).
    """
    names = ["hnsw_flat_l2", "hnsw_flat_ip", "hnsw_flat_ef40", "hnsw_flat_large", "idmap_hnsw", "idmap2_hnsw",
             "hnsw_empty", "hnsw_one", "hnsw_ties_l2", "hnsw_ties_ip", "hnsw_beam2",
             "bin_hnsw", "bin_idmap_hnsw"] + ["hnsw_sq_" + q for q in QTYPES]
    for name in names:
        path = os.path.join(OUT, name + ".faiss")
        binary = name.startswith("bin_")
        outer = faiss.read_index_binary(path) if binary else faiss.read_index(path)
        idmap = None
        inner = outer
        if name.startswith(("idmap", "bin_idmap")):
            idmap = arr(outer.id_map)
            inner = faiss.downcast_IndexBinary(outer.index) if binary else faiss.downcast_index(outer.index)
        n = inner.ntotal
        nq = 12 if name == "hnsw_flat_large" else 25
        if binary:
            base = np.vstack([arr(faiss.downcast_IndexBinary(inner.storage).xb).reshape(-1, inner.code_size)])
            q = rng.integers(0, 256, (nq, inner.code_size)).astype("uint8")
            q[: nq // 5] = base[rng.integers(0, n, nq // 5)]  # exact copies: distance 0 and ties
        else:
            d = inner.d
            base = inner.reconstruct_n(0, n) if n else np.zeros((0, d), "float32")
            if name.startswith("hnsw_ties"):
                q = rng.integers(0, 4, (nq, d)).astype("float32")
            else:
                q = vecs(nq, d)
                if n:
                    q[: nq // 5] = base[rng.integers(0, n, nq // 5)]
        stored_ef = inner.hnsw.efSearch
        configs = [(1, None, None), (10, None, None), (40, None, None)]
        if not binary and name != "hnsw_beam2":
            configs += [(10, 8, None), (10, 16, None), (10, 64, None), (5, 3, None)]
            if n >= 50:
                allowed = np.sort(rng.permutation(n)[: n // 5])
                few = np.sort(rng.permutation(n)[:4])
                configs += [(10, None, allowed), (10, 64, allowed), (10, None, few), (3, 8, allowed)]
        runs = []
        for k, ef, allowed in configs:
            D, I, st = hnsw_search(inner, q, k, ef, allowed, stored_ef)
            if binary:
                D = D.astype("int64")
            if idmap is not None:
                I = np.where(I >= 0, idmap[np.maximum(I, 0)], -1)
            ext_allowed = None
            if allowed is not None:
                ext_allowed = (idmap[allowed] if idmap is not None else allowed).tolist()
            exact = None
            if allowed is not None:
                # FAISS's own brute force over the allowed ids (the storage index
                # with an IDSelector, one query at a time: sequential kernels).
                storage = faiss.downcast_index(inner.storage)
                ED, EI = [], []
                for qi in range(len(q)):
                    dd, ii = storage.search(q[qi:qi + 1], k, params=faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed.astype("int64"))))
                    if idmap is not None:
                        ii = np.where(ii >= 0, idmap[np.maximum(ii, 0)], -1)
                    ED.append(fl(dd[0]))
                    EI.append(ii[0].tolist())
                exact = {"ids": EI, "distances": ED}
            runs.append({"k": k, "ef_search": ef, "allow_ids": ext_allowed, "exact": exact,
                         "ids": I.tolist(), "distances": [fl(r) if not binary else [int(v) for v in r] for r in D],
                         "faiss_stats": st})
        out = {"fixture": name, "faiss_version": faiss.__version__, "binary": binary, "stored_ef_search": int(stored_ef),
               "queries": q.astype(int).tolist() if binary else [fl(r) for r in q], "runs": runs}
        with open(os.path.join(OUT, name + ".search.json"), "w") as f:
            json.dump(out, f, separators=(",", ":"))
            f.write("\n")


INDEX_EF_FIXTURES = ["hnsw_flat_l2", "hnsw_flat_ip", "idmap_hnsw", "hnsw_beam2", "bin_hnsw"]


def index_ef_fixtures():
    """FAISS 1.7.3's results with the efSearch *attribute* set: NAME.index_ef.json.

    Each run sets index.hnsw.efSearch = index_ef_search on the object read
    from NAME.faiss (what FAISS 1.7.x code and OpenSearch's index-level
    ef_search do) and searches with k, no SearchParameters when neither a
    filter nor ef_search is given. A filter needs SearchParametersHNSW in
    1.7.3 (plain SearchParameters are refused); its efSearch is then the
    attribute's value unless the run names ef_search (a per-query value on
    top of the attribute). The .faiss files are only read, so this part can
    be run alone (--index-ef-only) without rebuilding the other fixtures.
    """
    rng = np.random.default_rng(20261201)
    for name in INDEX_EF_FIXTURES:
        path = os.path.join(OUT, name + ".faiss")
        binary = name.startswith("bin_")
        outer = faiss.read_index_binary(path) if binary else faiss.read_index(path)
        idmap = None
        inner = outer
        if name.startswith("idmap"):
            idmap = arr(outer.id_map)
            inner = faiss.downcast_index(outer.index)
        n = inner.ntotal
        nq = 5
        if binary:
            base = arr(faiss.downcast_IndexBinary(inner.storage).xb).reshape(-1, inner.code_size)
            q = rng.integers(0, 256, (nq, inner.code_size)).astype("uint8")
            q[:1] = base[rng.integers(0, n, 1)]
        else:
            # Near stored vectors (the first one exactly on one).
            base = inner.reconstruct_n(0, n)
            q = base[rng.integers(0, n, nq)] + rng.standard_normal((nq, inner.d)).astype("float32")
            q[0] = base[rng.integers(0, n)]
            q = q.astype("float32")
        # Filters: beam search and 1.7.3's binary HNSW take no parameters.
        filtered = not binary and name != "hnsw_beam2"
        allowed = np.sort(rng.permutation(n)[: n // 4])
        configs = []
        for N in (16, 64, 256):
            for k in (1, 10, 100):
                configs.append((N, k, None, None))
                if filtered:
                    configs.append((N, k, None, allowed))
        if filtered:
            configs += [(64, 10, 16, None), (16, 10, 64, None), (256, 10, 32, allowed)]
        stored = int(inner.hnsw.efSearch)
        runs = []
        for N, k, ef, sel in configs:
            inner.hnsw.efSearch = N
            D, I, st = hnsw_search(inner, q, k, ef, sel, N)
            if idmap is not None:
                I = np.where(I >= 0, idmap[np.maximum(I, 0)], -1)
            ext = None
            if sel is not None:
                ext = (idmap[sel] if idmap is not None else sel).tolist()
            runs.append({"index_ef_search": N, "k": k, "ef_search": ef, "allow_ids": ext, "ids": I.tolist(),
                         "distances": [[int(v) for v in r] if binary else fl(r) for r in D], "faiss_stats": st})
        out = {"fixture": name, "faiss_version": faiss.__version__, "binary": binary,
               "stored_ef_search": stored,
               "queries": q.astype(int).tolist() if binary else [fl(r) for r in q], "runs": runs}
        with open(os.path.join(OUT, name + ".index_ef.json"), "w") as f:
            json.dump(out, f, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--index-ef-only"]:
        index_ef_fixtures()
    else:
        main()
