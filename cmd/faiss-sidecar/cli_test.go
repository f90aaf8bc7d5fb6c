package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/buildinfo"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// TestVersion: `--version` and `version` print buildinfo's line; `version
// --json` its fields.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errOut := runCLI(args...)
		assert.Equal(t, 0, code, args)
		assert.Empty(t, errOut, args)
		assert.Equal(t, buildinfo.Version()+"\n", out, args)
		assert.True(t, strings.HasPrefix(out, "faiss-sidecar "), out)
	}
	code, out, _ := runCLI("version", "--json")
	require.Equal(t, 0, code)
	var got buildinfo.Info
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, buildinfo.Get(), got)
	assert.NotEmpty(t, got.Go)
}

// TestHelp: every command, subcommands of bench included, answers --help
// and -h on stdout with its usage line and what it does before its flags,
// and exits 0; the top-level usage lists them all.
func TestHelp(t *testing.T) {
	code, top, errOut := runCLI("--help")
	require.Equal(t, 0, code)
	assert.Empty(t, errOut)
	for _, name := range []string{"serve", "health", "inspect", "compress", "quantize", "search", "export-vectors", "bench", "bench storage", "bench rerank", "version"} {
		assert.Regexp(t, "(?m)^  "+regexp.QuoteMeta(name)+" +[A-Z]", top, "top-level usage lacks %q", name)
	}
	assert.Contains(t, top, "2 usage error")
	require.Len(t, docs, 11)
	for _, d := range docs {
		for _, h := range []string{"--help", "-h"} {
			args := append(strings.Fields(d.name), h)
			code, out, errOut := runCLI(args...)
			assert.Equal(t, 0, code, args)
			assert.Empty(t, errOut, args)
			require.True(t, strings.HasPrefix(out, "usage: faiss-sidecar "+d.name), "%v: %q", args, out)
			require.Contains(t, out, "\n\n"+d.summary+"\n", args)
			assert.True(t, strings.HasSuffix(d.summary, "."), "one sentence: %q", d.summary)
			if d.name != "export-vectors" {
				flags := strings.Index(out, "\nflags:\n")
				require.Greater(t, flags, strings.Index(out, d.summary), "%v: the sentence comes before the flags", args)
				assert.Regexp(t, `(?m)^  -[a-z]`, out[flags:], args)
			}
		}
	}
	// `help COMMAND` is `COMMAND --help`; flags after a positional too.
	_, a, _ := runCLI("help", "bench", "storage")
	_, b, _ := runCLI("bench", "storage", "--help")
	assert.Equal(t, b, a)
	code, out, _ := runCLI("search", "x.faiss", "-h")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "usage: faiss-sidecar search INDEX"))
	// No command at all: the usage on stderr, a usage error.
	code, out, errOut = runCLI()
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "bench rerank")
}

// TestUsageErrorsBeforeWork: a bad flag value, name or argument exits 2
// with one line on stderr and nothing on stdout. The index and query paths
// do not exist: were anything opened before the flags were checked, the
// exit status would be 1.
func TestUsageErrorsBeforeWork(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	idx, q, out := missing+".faiss", missing+".fvecs", filepath.Join(t.TempDir(), "out.jsonl")
	search := []string{"search", idx, "--queries", q, "--out", out}
	bench := []string{"bench", idx, "--queries", q, "--json"}
	cases := []struct {
		args []string
		msg  string
	}{
		{append(search, "--k", "0"), "k=0 is out of range [1, 10000]"},
		{append(search, "--k", "10001"), "k=10001 is out of range"},
		{append(search, "--k", "ten"), `invalid value "ten" for flag -k`},
		{append(search, "--ef-search", "-1"), "ef_search=-1 is out of range"},
		{append(search, "--threads", "-2"), "--threads -2 is negative"},
		{append(search, "--cache-bytes", "-1"), "--cache-bytes -1 is negative"},
		{append(search, "--cache-block", "1000"), "block size 1000 is not a power of two"},
		{append(search, "--memory-budget", "-5"), "--memory-budget -5 is negative"},
		{append(search, "--exact-filter-max", "-2"), "--exact-filter-max -2"},
		{append(search, "--oversample", "-1"), "--oversample -1 is negative"},
		{append(search, "--rerank-strategy", "tape"), `unknown --rerank-strategy "tape"`},
		{append(search, "--rerank-metric", "l3"), `unknown --rerank-metric "l3"`},
		{append(search, "--mode", "warm"), `unknown mode "warm"`},
		{append(search, "--backend", "tape"), `unknown backend "tape"`},
		{append(search, "--semantics", "faiss-2"), `unknown semantics "faiss-2"`},
		{append(search, "--kernel", "slow"), `unknown kernel "slow"`},
		{append(search, "--mode", "full", "--backend", "mmap"), "mode full reads the whole file"},
		{append(search, "--mode", "full", "--memory-budget", "1000000"), "--memory-budget applies to --mode memory_efficient"},
		{[]string{"search", idx, "--out", out}, "usage: faiss-sidecar search INDEX"},
		{[]string{"search", "--queries", q}, "usage: faiss-sidecar search INDEX"},
		{append(bench, "--k", "0"), "k=0 is out of range"},
		{append(bench, "--ef-search", "2000000"), "ef_search=2000000 is out of range"},
		{append(bench, "--threads", "0"), "--threads must be ≥ 1"},
		{append(bench, "--max-queries", "-1"), "--max-queries -1 is negative"},
		{append(bench, "--duration", "0s"), "--duration 0s must be positive"},
		{append(bench, "--cache-bytes", "-3"), "--cache-bytes -3 is negative"},
		{append(bench, "--backend", "tape"), `unknown backend "tape"`},
		{[]string{"bench", idx}, "usage: faiss-sidecar bench INDEX"},
		{[]string{"bench", "storage", idx, "--backend", "tape", "--cold"}, `unknown backend "tape"`},
		{[]string{"bench", "storage", idx, "--reads", "0"}, "must be positive"},
		{[]string{"bench", "storage", idx, "--read-size", "-4096"}, "must be positive"},
		{[]string{"bench", "storage", idx, "--inflight", "0"}, "must be positive"},
		{[]string{"bench", "storage", idx, "--cache-bytes", "-1"}, "--cache-bytes -1 is negative"},
		{[]string{"bench", "storage"}, "usage: faiss-sidecar bench storage FILE"},
		{[]string{"bench", "rerank", "--vectors", missing, "--shortlist", "0"}, "must be positive"},
		{[]string{"bench", "rerank", "--vectors", missing, "--trials", "-1"}, "must be positive"},
		{[]string{"bench", "rerank", "--vectors", missing, "--workers", "0"}, "must be positive"},
		{[]string{"bench", "rerank", "--vectors", missing, "--strategy", "tape"}, `unknown --strategy "tape"`},
		{[]string{"bench", "rerank"}, "usage: faiss-sidecar bench rerank"},
		{[]string{"compress", idx, out, "--frame-size", "0"}, "zstd frame size 0 out of range"},
		{[]string{"compress", idx, out, "--frame-size", "-1"}, "zstd frame size -1 out of range"},
		{[]string{"compress", idx, out, "--level", "23"}, "--level 23"},
		{[]string{"compress", idx}, "usage: faiss-sidecar compress IN OUT"},
		{[]string{"export-vectors", idx}, "usage: faiss-sidecar export-vectors"},
		{[]string{"export-vectors", idx, out, "--dim", "3"}, "flag provided but not defined: -dim"},
		{[]string{"inspect", idx, "--backend", "tape"}, `unknown backend "tape"`},
		{[]string{"inspect"}, "usage: faiss-sidecar inspect FILE"},
		{[]string{"health", "--url", "localhost:8080"}, "is not an http:// or https:// URL"},
		{[]string{"health", "extra"}, "usage: faiss-sidecar health"},
		{[]string{"serve", "--listen", "127.0.0.1:8092x"}, `port "8092x" is not a number`},
		{[]string{"serve", "--listen", "127.0.0.1:70000"}, `port "70000" is not a number from 0 to 65535`},
		{[]string{"serve", "--listen", "localhost"}, "missing port in address"},
		{[]string{"serve", "--memory-budget", "-5"}, "--memory-budget -5 is negative"},
		{[]string{"serve", "--max-body-bytes", "-1"}, "--max-body-bytes -1 is negative"},
		{[]string{"serve", "--request-timeout", "-1s"}, "--request-timeout -1s is negative"},
		{[]string{"serve", "--log-level", "chatty"}, `log level "chatty"`},
		{[]string{"serve", "extra"}, "usage: faiss-sidecar serve"},
		{[]string{"version", "extra"}, "usage: faiss-sidecar version"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(c.args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.msg, c.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", c.args, stderr)
		assert.Empty(t, stdout, c.args)
	}
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing written")
}

// TestRuntimeErrors: a missing or corrupt file is a failure (exit 1), not a
// usage error.
func TestRuntimeErrors(t *testing.T) {
	dir := t.TempDir()
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	good, err := os.ReadFile(idx)
	require.NoError(t, err)
	trunc := filepath.Join(dir, "trunc.faiss")
	require.NoError(t, os.WriteFile(trunc, good[:3000], 0o644))
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"search", filepath.Join(dir, "missing.faiss"), "--queries", q}, "no such file"},
		{[]string{"search", idx, "--queries", filepath.Join(dir, "missing.fvecs")}, "no such file"},
		{[]string{"search", trunc, "--queries", q}, "file truncated"},
		{[]string{"inspect", trunc}, "file truncated"},
		{[]string{"bench", trunc, "--queries", q}, "file truncated"},
		{[]string{"compress", filepath.Join(dir, "missing"), filepath.Join(dir, "out.zst")}, "no such file"},
		{[]string{"export-vectors", filepath.Join(dir, "missing.fvecs"), filepath.Join(dir, "out.vec")}, "no such file"},
		{[]string{"bench", "rerank", "--vectors", filepath.Join(dir, "missing.vec")}, "no such file"},
	} {
		code, stdout, stderr := runCLI(c.args...)
		assert.Equal(t, 1, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.msg, c.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), c.args)
		assert.Empty(t, stdout, c.args)
	}
}

// withUmask runs f with the process umask set to m.
func withUmask(m int, f func()) {
	old := syscall.Umask(m)
	defer syscall.Umask(old)
	f()
}

// TestOutputFiles: search --out, compress and export-vectors create their
// output as os.Create would (0666 less the umask; an existing file keeps its
// mode), leave no temporary file behind, and name the user's path in errors.
func TestOutputFiles(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	commands := map[string]func(out string) []string{
		"search":         func(out string) []string { return []string{"search", idx, "--queries", q, "--k", "3", "--out", out} },
		"compress":       func(out string) []string { return []string{"compress", idx, out} },
		"export-vectors": func(out string) []string { return []string{"export-vectors", idx, out} },
	}
	if !zstd.Supported {
		delete(commands, "compress")
	}
	for name, args := range commands {
		for _, umask := range []int{0o022, 0o077, 0o002} {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			var code int
			var stderr string
			var want os.FileMode
			withUmask(umask, func() {
				code, _, stderr = runCLI(args(out)...)
				f, err := os.Create(filepath.Join(dir, "reference"))
				require.NoError(t, err)
				fi, err := f.Stat()
				require.NoError(t, err)
				f.Close()
				want = fi.Mode().Perm()
			})
			require.Equal(t, 0, code, "%s: %s", name, stderr)
			assert.Equal(t, os.FileMode(0o666&^umask), want)
			fi, err := os.Stat(out)
			require.NoError(t, err)
			assert.Equal(t, want, fi.Mode().Perm(), "%s under umask %#o", name, umask)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 2, "%s left a temporary file: %v", name, entries)
		}
		// An existing file is replaced and keeps its mode, as os.Create keeps it.
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		require.NoError(t, os.WriteFile(out, []byte("old"), 0o640))
		require.NoError(t, os.Chmod(out, 0o640))
		code, _, stderr := runCLI(args(out)...)
		require.Equal(t, 0, code, "%s: %s", name, stderr)
		fi, err := os.Stat(out)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), name)
		assert.Greater(t, fi.Size(), int64(3), name)

		// Errors name the path asked for, never the temporary file.
		bad := filepath.Join(t.TempDir(), "no", "such", "dir", "out")
		code, _, stderr = runCLI(args(bad)...)
		assert.Equal(t, 1, code, name)
		assert.Equal(t, "faiss-sidecar "+name+": "+bad+": no such file or directory\n", stderr)
		// The target is a directory: the rename fails, the temporary file goes.
		code, _, stderr = runCLI(args(dir)...)
		assert.Equal(t, 1, code, name)
		assert.Contains(t, stderr, dir+": ", name)
		assert.NotContains(t, stderr, ".tmp-", name)
		entries, err := os.ReadDir(filepath.Dir(dir))
		require.NoError(t, err)
		for _, e := range entries {
			assert.NotContains(t, e.Name(), ".tmp-", name)
		}
	}
}

// TestZstdMistakes: a zstd file read through another backend, or cut
// short, says it is zstd and what to do; compress refuses compressed input.
func TestZstdMistakes(t *testing.T) {
	if !zstd.Supported {
		t.Skip("built without cgo: no zstd")
	}
	dir := t.TempDir()
	src := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	zst := filepath.Join(dir, "idx.faiss.zst")
	code, _, stderr := runCLI("compress", src, zst, "--frame-size", "8192")
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(zst)
	require.NoError(t, err)
	trunc := filepath.Join(dir, "trunc.zst")
	require.NoError(t, os.WriteFile(trunc, b[:len(b)/2], 0o644))

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"inspect", zst, "--backend", "pread"}, "zstd-compressed data, not a FAISS index: open it with backend zstd (--backend zstd)"},
		{[]string{"inspect", zst, "--backend", "mmap"}, "zstd-compressed data"},
		{[]string{"search", zst, "--mode", "full", "--queries", filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")}, "zstd-compressed data"},
		{[]string{"inspect", trunc}, "zstd-compressed data"},
		{[]string{"inspect", trunc, "--backend", "zstd"}, trunc + " starts with a zstd frame but has no seek table at its end: it is truncated"},
		{[]string{"compress", zst, filepath.Join(dir, "again.zst")}, zst + " is zstd-compressed already"},
		{[]string{"compress", trunc, filepath.Join(dir, "again.zst")}, trunc + " is zstd-compressed already"},
	} {
		code, stdout, stderr := runCLI(c.args...)
		assert.Equal(t, 1, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.msg, c.args)
		assert.NotContains(t, stderr, "unsupported FAISS index type 0x28b52ffd at byte 0\n", c.args)
		assert.Empty(t, stdout, c.args)
	}
	_, err = os.Stat(filepath.Join(dir, "again.zst"))
	assert.True(t, os.IsNotExist(err))
}

// TestInspectVerifyNoViolations: a clean file's report lists its violations
// as an empty array, not null.
func TestInspectVerifyNoViolations(t *testing.T) {
	code, out, stderr := runCLI("inspect", "--json", "--verify", filepath.Join(fixtures, "opensearch_0_165_vec.faiss"))
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Verify map[string]json.RawMessage `json:"verify"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, "[]", string(rep.Verify["violations"]))
	assert.Equal(t, "0", string(rep.Verify["violations_total"]))
}

// TestBenchReportsEfSearch: bench's JSON names the efSearch it searched
// with (--ef-search, else --index-ef-search, else the stored one) and the
// stored one (FAISS wrote the fixture with efSearch 16).
func TestBenchReportsEfSearch(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	var fx struct {
		EfSearchStored int `json:"ef_search_stored"`
	}
	b, err := os.ReadFile(filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &fx))
	require.Equal(t, 16, fx.EfSearchStored)
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	for _, c := range []struct {
		extra []string
		want  int
	}{{nil, fx.EfSearchStored}, {[]string{"--ef-search", "40"}, 40}, {[]string{"--index-ef-search", "32"}, 32},
		{[]string{"--index-ef-search", "32", "--ef-search", "20"}, 20}} {
		code, out, stderr := runCLI(append([]string{"bench", idx, "--queries", q, "--k", "10", "--duration", "1ms", "--json"}, c.extra...)...)
		require.Equal(t, 0, code, stderr)
		var r struct {
			Ef       *int `json:"ef_search"`
			EfStored *int `json:"ef_search_stored"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		require.NotNil(t, r.Ef)
		require.NotNil(t, r.EfStored)
		assert.Equal(t, c.want, *r.Ef, c.extra)
		assert.Equal(t, fx.EfSearchStored, *r.EfStored, c.extra)
	}
}

// syncBuffer is a bytes.Buffer safe for a server's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeStartupLog: serve's first log line names the version, the data
// roots, the memory budget, whether a token is set (never the token) and
// the indexes it loads.
func TestServeStartupLog(t *testing.T) {
	root := t.TempDir()
	b, err := os.ReadFile(filepath.Join(fixtures, "opensearch_0_165_vec.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "v.faiss"), b, 0o644))
	const token = "s3cret-t0ken-never-logged"
	cfg := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"data_roots":["`+root+`"],"memory_budget":50000000,"token":"`+token+`",
		"indexes":{"vecs":{"path":"v.faiss"},"again":{"path":"v.faiss","mode":"full"}}}`), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	addr := freeAddr(t)
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- run([]string{"serve", "--config", cfg, "--listen", addr}, &stdout, &stderr) }()
	up := false
	for i := 0; i < 200 && !up; i++ {
		if r, err := http.Get("http://" + addr + "/_health"); err == nil {
			r.Body.Close()
			up = r.StatusCode == 200
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	require.True(t, up, "server did not come up: %s", stderr.String())
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not shut down")
	}
	logs := stderr.String()
	assert.NotContains(t, logs, token)
	sc := bufio.NewScanner(strings.NewReader(logs))
	require.True(t, sc.Scan())
	var first struct {
		Msg          string   `json:"msg"`
		Version      string   `json:"version"`
		Listen       string   `json:"listen"`
		DataRoots    []string `json:"data_roots"`
		MemoryBudget int64    `json:"memory_budget"`
		TokenSet     *bool    `json:"token_set"`
		Indexes      []string `json:"indexes"`
	}
	require.NoError(t, json.Unmarshal(sc.Bytes(), &first), sc.Text())
	assert.Equal(t, "starting", first.Msg)
	assert.Equal(t, buildinfo.Version(), first.Version)
	assert.Equal(t, addr, first.Listen)
	assert.Equal(t, []string{root}, first.DataRoots)
	assert.Equal(t, int64(50000000), first.MemoryBudget)
	require.NotNil(t, first.TokenSet)
	assert.True(t, *first.TokenSet)
	assert.Equal(t, []string{"again", "vecs"}, first.Indexes)
}

// TestServeBadListen: a bad listen address is a usage error before
// anything is logged or listened on.
func TestServeBadListen(t *testing.T) {
	code, out, stderr := runCLI("serve", "--listen", "127.0.0.1:8092x")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "faiss-sidecar serve: listen address \"127.0.0.1:8092x\": port \"8092x\" is not a number from 0 to 65535\n", stderr)
	t.Setenv("FAISS_SIDECAR_LISTEN", ":http-alt")
	code, _, stderr = runCLI("serve")
	assert.Equal(t, 2, code)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
}

// readmeRoot is the repository root, where the README's commands run.
const readmeRoot = "../.."

// readmeCommands returns the README's `go run ./cmd/faiss-sidecar CMD …`
// lines for CMD (continuation lines joined), as argument lists.
func readmeCommands(t *testing.T, cmd string) [][]string {
	b, err := os.ReadFile(filepath.Join(readmeRoot, "README.md"))
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	var out [][]string
	prefix := "go run ./cmd/faiss-sidecar " + cmd + " "
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			out = append(out, f[3:])
		}
	}
	return out
}

// recallAt is the share of each row's first k ids found in gt's row.
func recallAt(t *testing.T, got [][]int64, gtPath string, k int) float64 {
	gt, err := vecio.ReadFile(gtPath)
	require.NoError(t, err)
	require.Len(t, got, gt.N)
	hits := 0
	for i, ids := range got {
		want := map[int64]bool{}
		for _, id := range gt.RowI64(i)[:k] {
			want[id] = true
		}
		for _, id := range ids[:k] {
			if want[id] {
				hits++
			}
		}
	}
	return float64(hits) / float64(len(got)*k)
}

// TestReadmeExamples runs the README's `search` and `bench` examples as
// written, from the repository root, and checks their recall against
// FAISS's exact ground truth: at least FAISS's own HNSW recall at the
// stored efSearch, less one hit in a hundred.
func TestReadmeExamples(t *testing.T) {
	var fx struct {
		K      int     `json:"k"`
		Recall float64 `json:"faiss_hnsw_recall"`
	}
	b, err := os.ReadFile(filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &fx))
	require.Equal(t, 10, fx.K)
	require.Greater(t, fx.Recall, 0.9)

	searches, benches := readmeCommands(t, "search"), readmeCommands(t, "bench")
	require.NotEmpty(t, searches, "README has no `go run ./cmd/faiss-sidecar search` example")
	require.NotEmpty(t, benches, "README has no `go run ./cmd/faiss-sidecar bench` example")
	t.Chdir(readmeRoot)
	for _, args := range searches {
		code, out, stderr := runCLI(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		var got [][]int64
		for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r struct {
				Query     int       `json:"query"`
				IDs       []int64   `json:"ids"`
				Distances []float64 `json:"distances"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &r), line)
			require.Equal(t, i, r.Query)
			require.Len(t, r.IDs, fx.K)
			got = append(got, r.IDs)
		}
		rec := recallAt(t, got, "testdata/queries/opensearch_0_165_vec.gt.ivecs", fx.K)
		assert.GreaterOrEqual(t, rec, fx.Recall-0.01, "%v: recall@%d", args, fx.K)
	}
	for _, args := range benches {
		require.Contains(t, args, "--gt", "the README's bench reports recall")
		code, out, stderr := runCLI(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		m := regexp.MustCompile(`recall@` + strconv.Itoa(fx.K) + ` ([0-9.]+)`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		rec, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, rec, fx.Recall-0.01, "%v: %s", args, out)
	}
}

// TestServeConfigAliases: the config file's aliases are set once its
// indexes are loaded; one naming no index stops the start.
func TestServeConfigAliases(t *testing.T) {
	root := t.TempDir()
	b, err := os.ReadFile(filepath.Join(fixtures, "opensearch_0_165_vec.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "v.faiss"), b, 0o644))
	cfg := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"data_roots":["`+root+`"],
		"indexes":{"seg-0":{"path":"v.faiss"},"seg-1":{"path":"v.faiss"}},"aliases":{"shard":["seg-0","seg-1"],"one":["seg-1"]}}`), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	addr := freeAddr(t)
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- run([]string{"serve", "--config", cfg, "--listen", addr}, &stdout, &stderr) }()
	var got []byte
	for i := 0; i < 200 && got == nil; i++ {
		if r, err := http.Get("http://" + addr + "/_aliases"); err == nil {
			got, _ = io.ReadAll(r.Body)
			r.Body.Close()
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	require.NotNil(t, got, "server did not come up: %s", stderr.String())
	assert.JSONEq(t, `{"seg-0":{"aliases":{"shard":{}}},"seg-1":{"aliases":{"one":{},"shard":{}}}}`, string(got))
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not shut down")
	}

	require.NoError(t, os.WriteFile(cfg, []byte(`{"data_roots":["`+root+`"],"indexes":{"seg-0":{"path":"v.faiss"}},"aliases":{"shard":["seg-0","seg-9"]}}`), 0o644))
	code, _, errOut := runCLI("serve", "--config", cfg, "--listen", freeAddr(t))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `aliases: actions[0].add: no index named "seg-9"`)
}
