package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// TestUsageErrorsNameTheProblem: a missing required flag, a missing or an
// extra argument is named before the usage line (exit 2).
func TestUsageErrorsNameTheProblem(t *testing.T) {
	stopServeAtOnce(t)
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"search", idx, "--k", "3"}, "faiss-sidecar search: --queries is required; usage: faiss-sidecar search INDEX"},
		{[]string{"bench", idx, "--k", "3"}, "faiss-sidecar bench: --queries is required; usage: faiss-sidecar bench INDEX"},
		{[]string{"search", idx, "x", "--queries", q}, `faiss-sidecar search: unexpected argument "x"; usage: faiss-sidecar search INDEX`},
		{[]string{"bench", idx, "--queries", q, "y"}, `faiss-sidecar bench: unexpected argument "y"; usage:`},
		{[]string{"search", "--queries", q}, "faiss-sidecar search: missing argument INDEX; usage:"},
		{[]string{"bench", "rerank"}, "faiss-sidecar bench rerank: --vectors is required; usage:"},
		{[]string{"bench", "storage", idx, idx}, `faiss-sidecar bench storage: unexpected argument "` + idx + `"`},
		{[]string{"compress", idx}, "faiss-sidecar compress: missing argument OUT; usage:"},
		{[]string{"export-vectors"}, "faiss-sidecar export-vectors: missing argument IN; usage:"},
		{[]string{"inspect", idx, "extra"}, `faiss-sidecar inspect: unexpected argument "extra"`},
		{[]string{"quantize", idx, "extra"}, `faiss-sidecar quantize: unexpected argument "extra"`},
		{[]string{"serve", "extra"}, `faiss-sidecar serve: unexpected argument "extra"`},
		{[]string{"health", "extra"}, `faiss-sidecar health: unexpected argument "extra"`},
		{[]string{"version", "extra"}, `faiss-sidecar version: unexpected argument "extra"; usage: faiss-sidecar version`},
		{[]string{"serve", "--memory-budget", "-1"}, "faiss-sidecar serve: --memory-budget -1 is negative"},
	} {
		code, out, errOut := runCLI(c.args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errOut)
		assert.True(t, strings.HasPrefix(errOut, c.msg), "%v: %q, want it to start %q", c.args, errOut, c.msg)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), c.args)
		assert.Empty(t, out, c.args)
	}
}

// TestOutputIsADirectory: an output path that is a directory is refused
// before any work, saying so, for every command that writes a file.
func TestOutputIsADirectory(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	dir := t.TempDir()
	cases := [][]string{
		{"search", idx, "--queries", q, "--k", "3", "--out", dir},
		{"export-vectors", idx, dir},
		{"quantize", idx, "--out", dir},
	}
	if zstd.Supported {
		cases = append(cases, []string{"compress", idx, dir})
	}
	for _, args := range cases {
		code, out, errOut := runCLI(args...)
		assert.Equal(t, 1, code, args)
		assert.Empty(t, out, args)
		assert.Equal(t, "faiss-sidecar "+args[0]+": "+dir+": is a directory; name the file to write\n", errOut, args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written into the directory")
}

// TestMemoryBudgetHelp: --help says what --memory-budget defaults to and
// what 0 means, never an internal "unset" value.
func TestMemoryBudgetHelp(t *testing.T) {
	for _, d := range docs {
		_, out, _ := runCLI(append(strings.Fields(d.name), "--help")...)
		assert.NotContains(t, out, "(default -", d.name)
		i := strings.Index(out, "\n  -memory-budget")
		if i < 0 {
			continue
		}
		help, _, _ := strings.Cut(out[i+1:], "\n  -") // to the next flag
		assert.Contains(t, help, "0: ", "%s: what 0 means: %s", d.name, help)
		assert.Contains(t, help, "efault", "%s: the default: %s", d.name, help)
	}
	_, out, _ := runCLI("serve", "--help")
	assert.Contains(t, out, "else 0; 0: the machine's memory, or its cgroup's limit, less the server's own")
}

// TestBenchThreadWord: bench's summary says "1 thread", "2 threads".
func TestBenchThreadWord(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	for threads, want := range map[string]string{"1": " 1 thread,", "2": " 2 threads,"} {
		code, out, errOut := runCLI("bench", idx, "--queries", q, "--k", "3", "--duration", "1ms", "--threads", threads)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, want)
	}
}

// TestGuideDirParents: --guide-dir creates only its last element; a
// missing parent is an error naming it, before any work (serve, search,
// bench, quantize), and nothing is created.
func TestGuideDirParents(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	tmp := t.TempDir()
	deep := filepath.Join(tmp, "no", "such", "guides")
	stopServeAtOnce(t)
	for _, args := range [][]string{
		{"search", idx, "--queries", q, "--k", "3", "--mode", "on_disk", "--guide-dir", deep},
		{"bench", idx, "--queries", q, "--k", "3", "--duration", "1ms", "--mode", "on_disk", "--guide-dir", deep},
		{"quantize", idx, "--guide-dir", deep},
		{"serve", "--listen", "127.0.0.1:0", "--guide-dir", deep},
	} {
		code, out, errOut := runCLI(args...)
		assert.Equal(t, 1, code, "%v: %s", args, errOut)
		assert.Empty(t, out, args)
		assert.Equal(t, "faiss-sidecar "+args[0]+": --guide-dir "+deep+": its parent "+filepath.Dir(deep)+
			" is not an existing directory (only the last element of the path is created)\n", errOut, args)
	}
	_, err := os.Stat(filepath.Join(tmp, "no"))
	assert.True(t, os.IsNotExist(err), "no parent created")

	file := filepath.Join(tmp, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	code, _, errOut := runCLI("quantize", idx, "--guide-dir", file)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--guide-dir "+file+": not a directory")

	// The last element alone is created, holding the guide.
	guides := filepath.Join(tmp, "guides")
	code, _, errOut = runCLI("search", idx, "--queries", q, "--k", "3", "--mode", "on_disk", "--guide-dir", guides)
	require.Equal(t, 0, code, errOut)
	entries, err := os.ReadDir(guides)
	require.NoError(t, err)
	assert.NotEmpty(t, entries, "the guide is written there")
}

// TestCLIJSONEndsInNewline: the JSON the commands print ends with a
// newline (version --json, inspect --json, bench --json, health).
func TestCLIJSONEndsInNewline(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) }))
	defer hs.Close()
	for _, args := range [][]string{
		{"version", "--json"},
		{"inspect", idx, "--json"},
		{"bench", idx, "--queries", q, "--k", "3", "--duration", "1ms", "--json"},
		{"health", "--url", hs.URL + "/_health"},
	} {
		code, out, errOut := runCLI(args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		assert.True(t, strings.HasSuffix(out, "}\n"), "%v: %q", args, out)
	}
}

// stopServeAtOnce makes a serve that got past its checks stop at once
// instead of serving on (the test then fails rather than hangs).
func stopServeAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	prev := serveContext
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	t.Cleanup(func() { serveContext = prev })
}
