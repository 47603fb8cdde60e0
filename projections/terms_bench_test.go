package projections

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/events/eventbench"
)

// BenchmarkTermCounter is the indexer's term work alone on generated Go-like
// files: each file's path counted once and its text counted (TermCounter),
// then its terms numbered in an update's vocabulary (TermVocab), a new
// vocabulary every 100 files as a batcher starts a new event. It reports
// the CPU a run takes, which a loaded machine changes less than the time.
func BenchmarkTermCounter(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	parts := []string{"config", "load", "parse", "file", "server", "HTTP", "user", "id", "cache", "index", "term", "store", "event", "write", "read", "batch"}
	ident := func() string {
		var s strings.Builder
		for k := range 1 + rng.Intn(3) {
			p := parts[rng.Intn(len(parts))]
			if k > 0 {
				p = strings.ToUpper(p[:1]) + p[1:]
			}
			s.WriteString(p)
		}
		fmt.Fprint(&s, rng.Intn(50))
		return s.String()
	}
	const files = 400
	paths, texts := make([]string, files), make([]string, files)
	size := 0
	for i := range files {
		var t strings.Builder
		for range 150 {
			fmt.Fprintf(&t, "func (r *%s) %s(ctx context.Context, %s string) error { return %s(r.%s) }\n", ident(), ident(), ident(), ident(), ident())
		}
		paths[i], texts[i] = fmt.Sprintf("pkg%d/file_%d.go", i%20, i), t.String()
		size += len(texts[i])
	}
	var c TermCounter
	var v TermVocab
	var refs []byte
	b.SetBytes(int64(size))
	cpu := eventbench.ProcessCPU()
	for b.Loop() {
		for i := range files {
			if i%100 == 0 {
				v.Reset()
				refs = refs[:0]
			}
			c.Reset()
			c.CountOnce(paths[i])
			c.Count(texts[i])
			refs = v.AppendRefs(refs, c.CountedInto(new(CountedBuffer)))
		}
	}
	b.ReportMetric(float64(eventbench.ProcessCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
