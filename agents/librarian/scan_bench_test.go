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

// benchIndexer generates the 20,000-file tree `sylk bench index` indexes
// and returns an indexer of it and how many files it holds.
func benchIndexer(b *testing.B) (*Indexer, int) {
	tree := filepath.Join(b.TempDir(), "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		b.Fatal(err)
	}
	g, err := GenerateTree(tree, 20000, 1)
	if err != nil {
		b.Fatal(err)
	}
	ix, err := NewIndexer(tree)
	if err != nil {
		b.Fatal(err)
	}
	return ix, len(g.Files)
}

// loopCPU runs run at each round of b's loop and reports the process's CPU
// a file (a loaded machine changes it less than the time).
func loopCPU(b *testing.B, files int, run func() error) {
	var cpu time.Duration
	for b.Loop() {
		start := eventbench.ProcessCPU()
		if err := run(); err != nil {
			b.Fatal(err)
		}
		cpu += eventbench.ProcessCPU() - start
	}
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N*files), "cpu-µs/file")
}

// BenchmarkScanTree is the reading side of an index alone: the walk, and
// the workers reading, redacting and extracting every file, and the batcher
// making the updates (which are dropped: no events, no fold). CPU µs per
// file; indexbench's BenchmarkIndexTree is the whole of an index.
func BenchmarkScanTree(b *testing.B) {
	ix, n := benchIndexer(b)
	loopCPU(b, n, func() error {
		return ix.ScanEach(context.Background(), Known{}, func(schemas.IndexUpdate) error { return nil })
	})
}

// BenchmarkReadTree is the floor of the reading side: the walk, and one
// goroutine opening, checking and reading every file as the indexer does
// (its system calls), and nothing else. CPU µs per file, to set beside
// grep -r's (about 4.6 in `sylk bench index`).
func BenchmarkReadTree(b *testing.B) {
	ix, n := benchIndexer(b)
	var buf []byte
	var err error
	loopCPU(b, n, func() error {
		walkErr := ix.walk(context.Background(), func(ch *scanChunk) bool {
			for _, c := range ch.items {
				var fh rawFile
				if fh, err = openRaw(filepath.Join(ix.Root, filepath.FromSlash(c.path))); err != nil {
					return false
				}
				buf, _, err = fh.readAll(buf, ix.maxSize())
				fh.close()
				if err != nil {
					return false
				}
			}
			return true
		})
		if err != nil {
			return err
		}
		return walkErr
	})
}
