package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

func runSearch(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	var ix indexFlags
	ix.register(fs)
	queries, k, ef := queryFlags(fs)
	allow := fs.String("allow-ids", "", "only return these external ids: one per line (.txt), .ivecs or an integer .npy")
	out := fs.String("out", "-", "output JSON lines, one per query (- for stdout)")
	threads := fs.Int("threads", 0, "worker goroutines (0: GOMAXPROCS)")
	radius := fs.String("radius", "", "range search instead of k: every node the walk finds strictly inside R (squared L2 < R, inner product > R, Hamming < R), in FAISS's order")
	var rr rerankFlags
	rr.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("search", pos, "INDEX"); err != nil {
		return err
	}
	if err := required("search", "queries", *queries); err != nil {
		return err
	}
	req := queryRequest(*k, *ef)
	if err := checkRequest(req); err != nil {
		return err
	}
	if *radius != "" {
		kSet := false
		fs.Visit(func(f *flag.Flag) { kSet = kSet || f.Name == "k" })
		if kSet {
			return usagef("give --k or --radius, not both")
		}
		r, err := strconv.ParseFloat(*radius, 32)
		if err != nil || math.IsNaN(r) || math.IsInf(r, 0) {
			return usagef("--radius %q is not a finite float32", *radius)
		}
		r32 := float32(r)
		req.Radius, req.MaxResults = &r32, engine.MaxRangeResults // FAISS's radius; every hit up to the most there can be
	}
	if *threads < 0 {
		return usagef("--threads %d is negative (0: GOMAXPROCS)", *threads)
	}
	if err := rr.validate(); err != nil {
		return err
	}
	if err := checkOutput(*out); err != nil { // before the work, not after it
		return err
	}
	if err := checkGuideDir(ix.guideDir); err != nil {
		return err
	}
	ix.workers = *threads                                          // the memory plan counts the queries that run at once (0: GOMAXPROCS)
	pi, qm, err := ix.prepareWithQueries(pos[0], *queries, 0, &rr) // the engine's refusals of the flags before any input is read
	if err != nil {
		return err
	}
	if *allow != "" { // read before the index opens too, and counted beside it
		if req.Filter, err = loadIDs(*allow); err != nil {
			pi.discard()
			return err
		}
		ix.beside += 8 * int64(len(req.Filter))
	}
	if req.Radius == nil { // every query's hits are held until written
		ix.beside += int64(qm.N) * int64(*k) * int64(unsafe.Sizeof(engine.Result{}))
	}
	l, qs, err := ix.openFor(pi, *queries, qm)
	if err != nil {
		return err
	}
	defer l.Close()
	switch {
	case req.Radius != nil && l.x.HasRerank():
		return usagef("--radius returns FAISS's own range results: it does not combine with rerank vectors or mode on_disk")
	case l.x.HasRerank():
		if err := rr.addRescoreQueries(l.x, qs); err != nil {
			return err
		}
	}
	qp, err := l.x.Plan(req)
	if err != nil {
		return err
	}
	// Every query is answered before anything is written.
	res := l.x.SearchBatch(&qp, qs, *threads)
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("query %d: %w", i, r.Err)
		}
	}
	return writeOutput(*out, stdout, func(w *bufio.Writer) error {
		buf := make([]byte, 0, 4096)
		for i, r := range res {
			buf = appendResultLine(buf[:0], i, r.Hits, l.x.Binary())
			if r.Profile.Truncated { // a radial query cut at the most results there can be
				buf = append(buf[:len(buf)-2], `,"truncated":true}`+"\n"...)
			}
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
func appendResultLine(b []byte, i int, hits []engine.Result, binary bool) []byte {
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
