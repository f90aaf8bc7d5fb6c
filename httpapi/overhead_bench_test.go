package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// BenchmarkHTTPOverhead compares one search in process with the same search
// over HTTP on loopback (keep-alive client, JSON both ways); the difference
// is what the API adds (target ≤ 100 µs at p50):
//
//	go test -run='^$' -bench=HTTPOverhead ./httpapi
func BenchmarkHTTPOverhead(b *testing.B) {
	abs, _ := filepath.Abs(fixtures)
	s, err := New(Config{DataRoots: []string{abs}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Reg.Load("b", LoadSpec{Path: "hnsw_flat_large.faiss", Mode: "full"}); err != nil {
		b.Fatal(err)
	}
	f := loadRuns(b, "hnsw_flat_large")
	body := []byte(fmt.Sprintf(`{"vector":%s,"k":10}`, vectorJSON(f.Queries[0])))
	b.Run("in-process", func(b *testing.B) {
		_, h, _ := s.Reg.acquire("b")
		defer h.release()
		for b.Loop() {
			req := SearchRequest{Vector: f.Queries[0], K: 10}
			if _, _, err := s.searchOne(h, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	client := &http.Client{}
	b.Run("http-loopback", func(b *testing.B) {
		for b.Loop() {
			r, err := client.Post(ts.URL+"/indexes/b/_search", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode != 200 {
				b.Fatal(r.StatusCode)
			}
		}
	})
}
