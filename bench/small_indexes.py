#!/usr/bin/env python3
"""Client half of bench/small_indexes.sh: loads N segments into a running
server over one keep-alive connection, then reports what the server holds.

    small_indexes.py PORT PID DIR N [MODE]

Prints one line per measurement: RSS before and after the loads (and its
growth per index), open descriptors, the loads' times as the client saw them
(p50, p99, mean; one connection, so each includes one round trip), then the
server's CPU over IDLE seconds (default 30) with every index loaded and no
request, from /proc/PID/stat; with QUERIES (default 0), each index is then
searched that many times (k 10, one random vector) and RSS read again.
"""
import http.client
import json
import os
import sys
import time

port, pid, root, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else "memory_efficient"
idle = float(os.environ.get("IDLE", "30"))
tick = os.sysconf("SC_CLK_TCK")


def rss(field="VmRSS:"):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0


def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick  # utime + stime, seconds


def fds():
    return len(os.listdir("/proc/%d/fd" % pid))


c = http.client.HTTPConnection("127.0.0.1", port)


def call(method, path, body=None):
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    return r.status, data


def heap():
    """Go heap in use, from the server's own metrics."""
    _, m = call("GET", "/metrics")
    for line in m.decode().splitlines():
        if line.startswith("go_memstats_heap_inuse_bytes "):
            return float(line.split()[1])
    return 0


call("GET", "/_health")
time.sleep(0.5)
r0, f0, h0 = rss(), fds(), heap()
a0, m0 = rss("RssAnon:"), rss("RssFile:")
lat = []
t0 = time.time()
for i in range(n):
    body = json.dumps({"path": os.path.join(root, "seg_%05d.faiss" % i), "mode": mode})
    s = time.perf_counter()
    st, data = call("PUT", "/indexes/s%05d" % i, body)
    lat.append(time.perf_counter() - s)
    if st != 200:
        sys.exit("load %d: HTTP %d %s" % (i, st, data[:300]))
wall = time.time() - t0
info = json.loads(call("GET", "/indexes/s%05d" % (n - 1))[1])
time.sleep(2)
r1, f1, h1 = rss(), fds(), heap()
a1, m1 = rss("RssAnon:"), rss("RssFile:")
lat.sort()
print("indexes %d mode %s backend %s" % (n, mode, info.get("backend")))
print("rss_before_mb %.1f rss_after_mb %.1f rss_per_index_kb %.1f" % (r0 / 1e6, r1 / 1e6, (r1 - r0) / n / 1e3))
print("  of which anonymous %.1f -> %.1f MB (%.1f KB per index), file-backed %.1f -> %.1f MB (%.1f KB per index)"
      % (a0 / 1e6, a1 / 1e6, (a1 - a0) / n / 1e3, m0 / 1e6, m1 / 1e6, (m1 - m0) / n / 1e3))
print("heap_inuse_before_mb %.1f heap_inuse_after_mb %.1f heap_per_index_kb %.1f" % (h0 / 1e6, h1 / 1e6, (h1 - h0) / n / 1e3))
print("resident_bytes_per_index %d (what GET reports the index counts against the budget)" % info["resident_bytes"])
print("fds_before %d fds_after %d" % (f0, f1))
print("load_ms p50 %.3f p99 %.3f mean %.3f (keep-alive, client side); %d loads in %.1fs"
      % (lat[n // 2] * 1e3, lat[min(n - 1, n * 99 // 100)] * 1e3, sum(lat) / n * 1e3, n, wall))
queries = int(os.environ.get("QUERIES", "0"))
if queries > 0:
    vec = json.dumps({"vector": [((i * 7919) % 1000) / 500.0 - 1 for i in range(128)], "k": 10})
    for i in range(n):
        for _ in range(queries):
            st, data = call("POST", "/indexes/s%05d/_search" % i, vec)
            if st != 200:
                sys.exit("search %d: HTTP %d %s" % (i, st, data[:300]))
    time.sleep(2)
    r2, h2, a2, m2 = rss(), heap(), rss("RssAnon:"), rss("RssFile:")
    print("after %d searches of each: rss_mb %.1f, anonymous %.1f MB (%.1f KB per index over before the loads), "
          "file-backed %.1f MB (the mapped files' pages the searches touched), heap_inuse_mb %.1f"
          % (queries, r2 / 1e6, a2 / 1e6, (a2 - a0) / n / 1e3, m2 / 1e6, h2 / 1e6))
if idle > 0:
    c.close()
    time.sleep(3)  # let the loads' garbage be collected before measuring idle
    u0, w0 = cpu(), time.time()
    time.sleep(idle)
    u1, w1 = cpu(), time.time()
    print("idle_cpu_pct %.2f (server CPU over %.0fs with %d indexes loaded, no requests)" % ((u1 - u0) / (w1 - w0) * 100, w1 - w0, n))
