// Package sysmem tells how much memory the process can have: the
// machine's RAM, or its cgroup's limit when that is lower.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Total is the memory the process can have, in bytes: the least of
// /proc/meminfo's MemTotal and the memory limits (cgroup v2 memory.max,
// v1 memory.limit_in_bytes) of the process's own cgroup and its ancestors
// that are readable and set; 0 when none is (not Linux).
func Total() int64 { return total("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup") }

// total is Total from these files: a meminfo file, a /proc/PID/cgroup
// file and the cgroup mount root.
func total(meminfo, cgroupFile, root string) int64 {
	var least int64
	take := func(n int64) {
		if n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	take(memTotal(meminfo))
	for _, f := range limitFiles(cgroupFile, root) {
		take(limitFile(f))
	}
	return least
}

// limitFiles lists the memory limit files that bind the process whose
// /proc/PID/cgroup is cgroupFile, under the cgroup mount root: its v2
// cgroup's memory.max and its v1 memory cgroup's memory.limit_in_bytes,
// and their ancestors' up to the root (a process in a child cgroup is
// held by its own limit, which the root's files do not show). Without a
// readable cgroupFile, the root's files.
func limitFiles(cgroupFile, root string) []string {
	paths := map[string]string{"v2": "/", "v1": "/"} // hierarchy → the process's cgroup
	if b, err := os.ReadFile(cgroupFile); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.SplitN(line, ":", 3)
			switch {
			case len(f) != 3 || !strings.HasPrefix(f[2], "/"):
			case f[0] == "0" && f[1] == "":
				paths["v2"] = f[2]
			case slices.Contains(strings.Split(f[1], ","), "memory"):
				paths["v1"] = f[2]
			}
		}
	}
	var out []string
	for _, h := range []struct{ hier, dir, file string }{{"v2", "", "memory.max"}, {"v1", "memory", "memory.limit_in_bytes"}} {
		for p := path.Clean(paths[h.hier]); ; p = path.Dir(p) {
			out = append(out, filepath.Join(root, h.dir, p, h.file))
			if p == "/" {
				break
			}
		}
	}
	return out
}

// memTotal is the MemTotal line of a meminfo file, in bytes (0 if absent).
func memTotal(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil && n < 1<<53 {
					return n << 10
				}
			}
		}
	}
	return 0
}

// limitFile is a cgroup memory limit file's value in bytes: 0 for "max",
// a value past 2^62 (cgroup v1's "no limit") or an unreadable file.
func limitFile(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}
