package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/stretchr/testify/require"
)

// TestSearchRadiusMatchesFAISS115: `search --radius` writes FAISS 1.15's
// range results line by line, in its order (ids exact, distances within a
// few float32 ulps of its AVX2 build), for every run of the three range
// fixtures (L2, IP, IndexIDMap; filters through --allow-ids, whose filtered
// IDMap runs FAISS answers at the stored efSearch).
func TestSearchRadiusMatchesFAISS115(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "faiss115")
	for _, name := range []string{"range_hnsw_flat_l2", "range_hnsw_flat_ip", "range_idmap_hnsw_flat_l2"} {
		fx, err := testfixtures.Load115(dir, name)
		require.NoError(t, err)
		var ids strings.Builder
		for _, id := range fx.Filter.IDs {
			ids.WriteString(strconv.FormatInt(id, 10) + "\n")
		}
		allow := filepath.Join(t.TempDir(), "allow.txt")
		require.NoError(t, os.WriteFile(allow, []byte(ids.String()), 0o644))
		for ri, run := range fx.Range {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			args := []string{"search", filepath.Join(dir, name+".faiss"), "--queries", filepath.Join(dir, "queries.fvecs"),
				"--radius", fmt.Sprint(run.Radius), "--ef-search", strconv.Itoa(run.EfSearch), "--out", out}
			if run.Filtered {
				args = append(args, "--allow-ids", allow)
			}
			code, _, errOut := runCLI(args...)
			require.Equal(t, 0, code, errOut)
			fh, err := os.Open(out)
			require.NoError(t, err)
			sc := bufio.NewScanner(fh)
			sc.Buffer(nil, 1<<20)
			i := 0
			for ; sc.Scan(); i++ {
				var line struct {
					Query     int       `json:"query"`
					IDs       []int64   `json:"ids"`
					Distances []float32 `json:"distances"`
					Truncated bool      `json:"truncated"`
				}
				require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
				require.Equal(t, i, line.Query)
				require.False(t, line.Truncated)
				lo, hi := run.Lims[i], run.Lims[i+1]
				require.Equal(t, run.IDs[lo:hi], append([]int64{}, line.IDs...), "%s run %d query %d", name, ri, i)
				for j, d := range line.Distances {
					require.InEpsilon(t, run.Dist[lo+j], float64(d), 1e-6, "%s run %d query %d rank %d", name, ri, i, j)
				}
			}
			fh.Close()
			require.Equal(t, len(run.Lims)-1, i)
		}
	}
}

// TestSearchRadiusErrors: --radius with --k, or a radius that is not a
// finite number, is a usage error.
func TestSearchRadiusErrors(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "faiss115")
	idx, q := filepath.Join(dir, "range_hnsw_flat_l2.faiss"), filepath.Join(dir, "queries.fvecs")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--radius", "5", "--k", "3"}, "--k or --radius"},
		{[]string{"--radius", "NaN"}, "not a finite float32"},
		{[]string{"--radius", "1e39"}, "not a finite float32"},
		{[]string{"--radius", "x"}, "not a finite float32"},
	} {
		code, _, errOut := runCLI(append([]string{"search", idx, "--queries", q}, c.args...)...)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.want)
	}
}
