package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// postWhenUp posts body to url once the server answers (2 s at most) and
// returns the answer's body ("" if it never answered).
func postWhenUp(url, body string) string {
	for range 100 {
		r, err := http.Post(url, "application/json", strings.NewReader(body))
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}

// TestServeDemo: `serve` with no configuration serves the embedded demo
// index, answers searches, and shuts down gracefully.
func TestServeDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	addr := freeAddr(t)
	done := make(chan int)
	go func() { code, _, _ := runCLI("serve", "--listen", addr); done <- code }()
	body := postWhenUp("http://"+addr+"/indexes/demo/_search", `{"vector":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"k":3}`)
	if !strings.Contains(body, `"hits":[{"id":`) {
		t.Fatalf("demo search: %q", body)
	}
	// Errors and GET name the demo's file as demo.faiss, never by the
	// server's temporary directory.
	body = postWhenUp("http://"+addr+"/indexes/demo/_search", `{"vector":[0,0,0],"k":3}`)
	assert.Contains(t, body, "index demo.faiss expects 20")
	assert.NotContains(t, body, "faiss-sidecar-demo-")
	r, err := http.Get("http://" + addr + "/indexes/demo")
	require.NoError(t, err)
	info, _ := io.ReadAll(r.Body)
	r.Body.Close()
	assert.Contains(t, string(info), `"path":"demo.faiss"`)
	assert.NotContains(t, string(info), "faiss-sidecar-demo-")
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

// TestServeLimits: the config file's request limits reach the server.
func TestServeLimits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	p := filepath.Join(t.TempDir(), "c.json")
	addr := freeAddr(t)
	os.WriteFile(p, []byte(`{"listen":"`+addr+`","max_msearch_vectors":2,"switch_timeout":"1m"}`), 0o644)
	done := make(chan int)
	go func() { code, _, _ := runCLI("serve", "--demo", "--config", p); done <- code }()
	v := "[" + strings.TrimSuffix(strings.Repeat("0.5,", 20), ",") + "]"
	body := postWhenUp("http://"+addr+"/indexes/demo/_msearch", `{"vectors":[`+v+`,`+v+`,`+v+`]}`)
	cancel()
	<-done
	if !strings.Contains(body, "_msearch has 3 vectors, at most 2 (max_msearch_vectors)") {
		t.Fatalf("msearch over the configured limit: %q", body)
	}
}

func TestServeBadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte(`{"listen":"127.0.0.1:1","lissen":2}`), 0o644)
	code, _, errOut := runCLI("serve", "--config", p)
	if code != 2 || !strings.Contains(errOut, `unknown field "lissen"`) || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d: %q", code, errOut)
	}
	for body, want := range map[string]string{
		`{"max_msearch_vectors":-1}`:                                                 "max_msearch_vectors -1 is negative",
		`{"max_ef_search":2000000}`:                                                  "max_ef_search 2000000 is above",
		`{"max_open_files":-1}`:                                                      "max_open_files -1 is negative",
		`{"switch_timeout":"soon"}`:                                                  `switch_timeout "soon"`,
		`{"max_request_work":"many"}`:                                                "cannot unmarshal",
		`{"listen":"127.0.0.1:99999","Token":"x"}`:                                   `unknown field "Token"`,
		`{"listen":"127.0.0.1:99999","MAX_EF_SEARCH":5}`:                             `unknown field "MAX_EF_SEARCH"`,
		`{"listen":"127.0.0.1:99999","token":"a","token":"b"}`:                       `duplicate field "token"`,
		`{"listen":"127.0.0.1:99999","indexes":{"a":{"path":"x"},"a":{"path":"y"}}}`: `duplicate field "a" in indexes`,
		`{"listen":"127.0.0.1:99999","indexes":{"a":{"path":"x","Mode":"full"}}}`:    `unknown field "Mode" in indexes["a"]`,
	} {
		os.WriteFile(p, []byte(body), 0o644)
		if code, _, errOut := runCLI("serve", "--config", p); code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d: %q, want 2 and %q", body, code, errOut, want)
		}
	}
	os.WriteFile(p, []byte(`{"data_roots":["`+t.TempDir()+`"],"indexes":{"x":{"path":"missing.faiss"}}}`), 0o644)
	if code, _, errOut := runCLI("serve", "--config", p); code != 1 || !strings.Contains(errOut, "index x: no file at") {
		t.Fatalf("exit %d: %q", code, errOut)
	}
	// More indexes than max_open_files lets the server hold open.
	fixtures, _ := filepath.Abs("../../testdata/fixtures")
	os.WriteFile(p, []byte(`{"listen":"127.0.0.1:0","data_roots":["`+fixtures+`"],"max_open_files":1,"indexes":{"a":{"path":"hnsw_flat_l2.faiss"},"b":{"path":"hnsw_flat_l2.faiss"}}}`), 0o644)
	if code, _, errOut := runCLI("serve", "--config", p); code != 1 || !strings.Contains(errOut, "index b: too many open files") || !strings.Contains(errOut, "(max_open_files)") {
		t.Fatalf("exit %d: %q", code, errOut)
	}
}

// TestHealthWait: `health --wait D` keeps asking a server that starts late
// and succeeds once it answers; with no server it fails (exit 1) after about
// D, naming the last error.
func TestHealthWait(t *testing.T) {
	addr := freeAddr(t)
	url := "http://" + addr + "/_health"
	go func() {
		time.Sleep(400 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"status":"ok"}`+"\n")
		})}
		t.Cleanup(func() { srv.Close() })
		srv.Serve(ln)
	}()
	code, out, errOut := runCLI("health", "--url", url)
	require.Equal(t, 1, code, "nothing listens yet: %s", out)
	require.Contains(t, errOut, "connection refused")
	code, out, errOut = runCLI("health", "--url", url, "--wait", "10s")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"status":"ok"}`+"\n", out)

	never := "http://" + freeAddr(t) + "/_health"
	start := time.Now()
	code, out, errOut = runCLI("health", "--url", never, "--wait", "700ms")
	took := time.Since(start)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "not healthy after 700ms")
	assert.Contains(t, errOut, "connection refused")
	assert.GreaterOrEqual(t, took, 700*time.Millisecond)
	assert.Less(t, took, 3*time.Second)

	code, _, errOut = runCLI("health", "--wait", "-1s")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--wait -1s is negative")
}

// TestServeBusyPort: a port in use fails at once (exit 1) naming the
// address, before the demo's curl line is printed or anything loaded.
func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	code, out, errOut := runCLI("serve", "--listen", addr)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.NotContains(t, errOut, "serving the demo index")
	assert.NotContains(t, errOut, `"msg":"starting"`, "nothing starts")
	assert.Equal(t, "faiss-sidecar serve: cannot listen on "+addr+": the address is in use (another server? stop it or choose another --listen)\n", errOut)
}

// TestServeRemovesStaleDemoDirs: a demo server removes the demo directories
// whose server is gone (killed before it could clean up), and neither a
// live server's nor a directory it cannot tell about; its own goes at
// shutdown.
func TestServeRemovesStaleDemoDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// A killed server's directory: its lock file, which no process holds.
	stale := filepath.Join(tmp, "faiss-sidecar-demo-123")
	require.NoError(t, os.Mkdir(stale, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(stale, demoLockName), nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "demo.faiss"), []byte("x"), 0o444))
	live, releaseLive, err := makeDemoDir()
	require.NoError(t, err)
	defer releaseLive()
	unknown := filepath.Join(tmp, "faiss-sidecar-demo-unknown")
	require.NoError(t, os.Mkdir(unknown, 0o700))

	ctx, cancel := context.WithCancel(context.Background())
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	addr := freeAddr(t)
	done := make(chan int)
	go func() { code, _, _ := runCLI("serve", "--listen", addr); done <- code }()
	require.NotEmpty(t, postWhenUp("http://"+addr+"/indexes/demo/_search", `{"vector":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"k":1}`))
	_, err = os.Stat(stale)
	assert.True(t, os.IsNotExist(err), "the stale directory is removed")
	assert.DirExists(t, live, "a live server's directory stays")
	assert.DirExists(t, unknown, "a directory without a lock file stays")
	dirs, _ := filepath.Glob(filepath.Join(tmp, demoDirPattern))
	assert.Len(t, dirs, 3, "the server's own, the live one, the unknown one: %v", dirs)
	cancel()
	require.Equal(t, 0, <-done)
	dirs, _ = filepath.Glob(filepath.Join(tmp, demoDirPattern))
	assert.ElementsMatch(t, []string{live, unknown}, dirs, "the server removes its own at shutdown")
}

// TestServeBadDataRoot: an empty data root (which would serve the working
// directory), a missing one and a file are refused at start with exit 1,
// naming the root, the reason and where it came from, whether given by
// flag, environment (a trailing colon) or config file.
func TestServeBadDataRoot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "README.md")
	require.NoError(t, os.WriteFile(file, []byte("# not a directory\n"), 0o644))
	cfg := func(roots string) string {
		p := filepath.Join(t.TempDir(), "c.json")
		require.NoError(t, os.WriteFile(p, []byte(`{"listen":"127.0.0.1:99999","data_roots":`+roots+`}`), 0o644))
		return p
	}
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--data-root", ""}, `--data-root: data root "" is empty`},
		{"", []string{"--data-root", dir, "--data-root", ""}, `--data-root: data root "" is empty`},
		{dir + ":", nil, `FAISS_SIDECAR_DATA_ROOT: data root "" is empty`},
		{":" + dir, nil, `FAISS_SIDECAR_DATA_ROOT: data root "" is empty`},
		{"", []string{"--config", cfg(`[""]`)}, `data_roots in `},
		{"", []string{"--data-root", file}, `--data-root: data root "` + file + `" is a regular file: name a directory`},
		{"", []string{"--data-root", filepath.Join(dir, "nope")}, `data root "` + filepath.Join(dir, "nope") + `" does not exist`},
	} {
		t.Setenv("FAISS_SIDECAR_DATA_ROOT", c.env)
		code, _, errOut := runCLI(append([]string{"serve", "--listen", "127.0.0.1:99999"}, c.args...)...)
		assert.Equal(t, 1, code, "%v %q: %s", c.args, c.env, errOut)
		assert.Contains(t, errOut, c.want, "%v %q", c.args, c.env)
	}
	p := cfg(`["` + dir + `", ""]`)
	code, _, errOut := runCLI("serve", "--config", p)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, `data_roots in `+p+`: data root "" is empty`)
}
