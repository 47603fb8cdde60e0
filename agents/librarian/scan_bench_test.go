package librarian

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/schemas"
)

// benchTree generates the 20,000-file tree `sylk bench index` indexes and
// returns its root and how many files it holds.
func benchTree(b *testing.B) (string, int) {
	tree := filepath.Join(b.TempDir(), "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		b.Fatal(err)
	}
	g, err := GenerateTree(tree, 20000, 1)
	if err != nil {
		b.Fatal(err)
	}
	return tree, len(g.Files)
}

// BenchmarkScanTree is the reading side of an index alone: the walk, and
// the workers reading, redacting and extracting every file, and the batcher
// making the updates (which are dropped: no events, no fold). CPU µs per
// file; indexbench's BenchmarkIndexTree is the whole of an index.
func BenchmarkScanTree(b *testing.B) {
	tree, n := benchTree(b)
	ix, err := NewIndexer(tree)
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	for b.Loop() {
		start := eventbench.ProcessCPU()
		if err := ix.ScanEach(context.Background(), Known{}, func(schemas.IndexUpdate) error { return nil }); err != nil {
			b.Fatal(err)
		}
		cpu += eventbench.ProcessCPU() - start
	}
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N*n), "cpu-µs/file")
}

// BenchmarkReadTree is the floor of the reading side: the walk, and one
// goroutine opening, checking and reading every file as the indexer does
// (its system calls), and nothing else. CPU µs per file, to set beside
// grep -r's (about 4.6 in `sylk bench index`).
func BenchmarkReadTree(b *testing.B) {
	tree, n := benchTree(b)
	ix, err := NewIndexer(tree)
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	var buf []byte
	for b.Loop() {
		start := eventbench.ProcessCPU()
		err := ix.walk(context.Background(), func(ch *scanChunk) bool {
			for _, c := range ch.items {
				fh, err := openRaw(filepath.Join(tree, filepath.FromSlash(c.path)))
				if err != nil {
					b.Fatal(err)
				}
				st, err := fh.stat()
				if err == nil {
					buf, err = fh.readAll(buf[:0], st.size, ix.maxSize())
				}
				if err == nil {
					_, err = fh.stat()
				}
				fh.close()
				if err != nil {
					b.Fatal(err)
				}
			}
			return true
		})
		if err != nil {
			b.Fatal(err)
		}
		cpu += eventbench.ProcessCPU() - start
	}
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N*n), "cpu-µs/file")
}
