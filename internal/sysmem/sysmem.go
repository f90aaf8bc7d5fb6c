// Package sysmem tells how much memory the process can have: the
// machine's RAM, or its cgroup's limit when that is lower.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Total is the memory the process can have, in bytes: the least of
// /proc/meminfo's MemTotal, the cgroup v2 memory.max and the cgroup v1
// memory.limit_in_bytes that are readable and set; 0 when none is (not
// Linux).
func Total() int64 {
	var least int64
	take := func(n int64) {
		if n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	take(memTotal("/proc/meminfo"))
	take(limitFile("/sys/fs/cgroup/memory.max"))
	take(limitFile("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
	return least
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
