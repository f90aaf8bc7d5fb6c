package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

func runSearch(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	var ix indexFlags
	ix.register(fs)
	queries, k, ef := queryFlags(fs)
	allow := fs.String("allow-ids", "", "only return these external ids: one per line (.txt) or .ivecs")
	out := fs.String("out", "-", "output JSON lines, one per query (- for stdout)")
	threads := fs.Int("threads", 0, "worker goroutines (0: GOMAXPROCS)")
	var rr rerankFlags
	rr.register(fs)
	usage := "usage: faiss-sidecar search INDEX --queries Q --k K [--ef-search EF] [--mode full|memory_efficient] [--backend NAME] [--semantics S] [--kernel K] [--allow-ids FILE] [--rerank-vectors FILE [--oversample F] [--rerank-strategy S]] --out OUT.jsonl"
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *queries == "" {
		return usagef("%s", usage)
	}
	l, qs, err := ix.openWithQueries(pos[0], *queries, 0)
	if err != nil {
		return err
	}
	defer l.Close()
	p := hnswsearch.Params{K: *k, EfSearch: *ef}
	if *allow != "" {
		if p.Filter, err = loadIDs(*allow); err != nil {
			return err
		}
	}
	rer, err := rr.open(l)
	if err != nil {
		return err
	}
	if rer != nil {
		defer rer.Close()
	}
	// Validate parameters once, on the first query, before writing anything.
	if len(qs) > 0 {
		if _, _, err := searchQuery(l.idx, qs[0], p); err != nil {
			return err
		}
	}
	sp := p
	var fq [][]float32
	if rer != nil {
		sp.K = rerank.ShortlistSize(p.K, rr.factor(l.idx))
		if fq, err = rr.floatQueries(l.idx, qs, rer.Dim); err != nil {
			return err
		}
	}
	res := l.idx.SearchBatch(qs, sp, *threads, nil)
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("query %d: %w", i, r.Err)
		}
		if rer != nil {
			if res[i].Hits, err = rr.apply(rer, l.idx, fq[i], r.Hits, p.K); err != nil {
				return fmt.Errorf("query %d: %w", i, err)
			}
		}
	}
	return writeOutput(*out, stdout, func(w *bufio.Writer) {
		buf := make([]byte, 0, 4096)
		for i, r := range res {
			buf = appendResultLine(buf[:0], i, r.Hits, l.idx.Binary())
			w.Write(buf)
		}
	})
}

func searchQuery(x *hnswsearch.Index, q hnswsearch.Query, p hnswsearch.Params) ([]hnswsearch.Result, hnswsearch.Stats, error) {
	if q.Code != nil {
		return x.SearchBinary(q.Code, p, nil)
	}
	return x.Search(q.Vector, p, nil)
}

// appendResultLine writes {"query": i, "ids": [...], "distances": [...]}\n.
// Float distances use the shortest text that reads back as the same float32;
// binary (Hamming) distances are integers.
func appendResultLine(b []byte, i int, hits []hnswsearch.Result, binary bool) []byte {
	b = append(b, `{"query":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"ids":[`...)
	for j, h := range hits {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, h.ID, 10)
	}
	b = append(b, `],"distances":[`...)
	for j, h := range hits {
		if j > 0 {
			b = append(b, ',')
		}
		if binary {
			b = strconv.AppendInt(b, int64(h.Distance), 10)
		} else {
			b = strconv.AppendFloat(b, float64(h.Distance), 'g', -1, 32)
		}
	}
	return append(b, "]}\n"...)
}

// writeOutput writes to path ("-": stdout) through a temporary file renamed
// into place, so a failed run never leaves half a file.
func writeOutput(path string, stdout io.Writer, write func(*bufio.Writer)) error {
	if path == "-" || path == "" {
		w := bufio.NewWriter(stdout)
		write(w)
		return w.Flush()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".out-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	write(w)
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
