package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
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
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *queries == "" {
		return usageOf("search")
	}
	if err := checkQuery(*k, *ef); err != nil {
		return err
	}
	if *threads < 0 {
		return usagef("--threads %d is negative (0: GOMAXPROCS)", *threads)
	}
	if err := rr.validate(); err != nil {
		return err
	}
	l, qs, err := ix.openWithQueries(pos[0], *queries, 0, &rr)
	if err != nil {
		return err
	}
	defer l.Close()
	req := engine.FAISSRequest{K: *k, EfSearch: *ef}
	if *allow != "" {
		if req.Filter, err = loadIDs(*allow); err != nil {
			return err
		}
	}
	var fq [][]float32
	if l.x.HasRerank() {
		if fq, err = rr.floatQueries(l.x, qs, l.x.RerankDim()); err != nil {
			return err
		}
	}
	// Every query is answered before anything is written.
	res := l.x.SearchBatchFAISS(qs, fq, req, *threads)
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("query %d: %w", i, r.Err)
		}
	}
	return writeOutput(*out, stdout, func(w *bufio.Writer) error {
		buf := make([]byte, 0, 4096)
		for i, r := range res {
			buf = appendResultLine(buf[:0], i, r.Hits, l.x.Binary())
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
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
