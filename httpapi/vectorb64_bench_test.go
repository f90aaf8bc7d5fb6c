package httpapi

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkDecodeSearchBody decodes a _search body of one 768-d float32
// vector into the values the engine takes, as the handler does (the fast
// parser into a reused request, then the query's values): the vector as
// base64 (target ≤ 10 µs), as the shortest decimal of each float32 (what
// Go and Java print), and as 17 significant digits (Python's json of
// float32 values made floats):
//
//	go test -run='^$' -bench=DecodeSearchBody ./httpapi
func BenchmarkDecodeSearchBody(b *testing.B) {
	const d = 768
	r := rand.New(rand.NewPCG(7, 68))
	v := make([]float64, d)
	for i := range v {
		v[i] = float64(float32(r.NormFloat64() * 0.05))
	}
	decimal := func(prec, bits int) string {
		var sb strings.Builder
		sb.WriteString(`{"vector":[`)
		for i, x := range v {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.FormatFloat(x, 'g', prec, bits))
		}
		sb.WriteString(`],"k":10}`)
		return sb.String()
	}
	for _, c := range []struct{ name, body string }{
		{"b64", `{"vector_b64":"` + b64Floats(v) + `","k":10}`},
		{"decimal-shortest", decimal(-1, 32)},
		{"decimal-17", decimal(17, 64)},
	} {
		b.Run("d=768/form="+c.name, func(b *testing.B) {
			body := []byte(c.body)
			var req SearchRequest
			var vals []float64
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req = SearchRequest{Vector: req.Vector[:0], VectorB64: VectorB64{b: req.VectorB64.b[:0]}}
				if !searchFast(body, &req) {
					b.Fatal("the fast parser declined the body")
				}
				q := req.query()
				var got Vector
				var err error
				if got, vals, err = q.read(d, false, "bench", vals); err != nil || len(got) != d {
					b.Fatal(err, len(got))
				}
				if float32(got[d-1]) != float32(v[d-1]) {
					b.Fatalf("value %v, want %v", got[d-1], v[d-1])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/body")
			b.ReportMetric(float64(len(body)), "body-bytes")
		})
	}
}
