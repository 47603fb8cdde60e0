package indexbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events/eventbench"
)

// The benchmark runs end to end at a small size and reports every figure.
func TestRunSmall(t *testing.T) {
	cs, rep, err := Run(brokertest.Context(t), Config{DataDir: t.TempDir(), Files: 120, Edits: 3, Searches: 12}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 5 {
		t.Fatalf("%d comparisons: %+v", len(cs), cs)
	}
	for _, c := range cs {
		if c.Sylk.PerSec <= 0 || c.Baseline.PerSec <= 0 || (c.Target <= 0) != (c.Name == cs[1].Name) {
			t.Errorf("comparison %q lacks a figure: %+v", c.Name, c)
		}
	}
	// The index is compared in alternated rounds, each of both sides.
	if r := cs[0].Rounds; len(r) != 3 || !r[0].SylkFirst || r[1].SylkFirst || !r[2].SylkFirst {
		t.Fatalf("index rounds: %+v", r)
	}
	for i, r := range cs[0].Rounds {
		if r.Sylk.Ops != 121 || r.Baseline.Ops != 121 || r.Ratio <= 0 {
			t.Errorf("round %d: %+v", i, r)
		}
	}
	if cs[1].Sylk.CPUPerOp <= 0 || cs[1].Sylk.CPUPerOp != cs[0].Sylk.CPUPerOp {
		t.Errorf("CPU comparison %+v does not hold the index's CPU %v", cs[1], cs[0].Sylk.CPUPerOp)
	}
	if rep.Files != 121 || rep.Events == 0 || rep.StreamBytes == 0 || rep.SourceBytes == 0 || rep.UpdateP50MS <= 0 || rep.SearchP99MS <= 0 {
		t.Fatalf("report: %+v", rep)
	}
}

// BenchmarkScan is the extraction alone: read, hash, redact and extract
// every file of a generated tree (what -cpuprofile should look at first).
// It reports the CPU a file takes, which a loaded machine changes less
// than the time.
func BenchmarkScan(b *testing.B) {
	tree := b.TempDir()
	g, err := librarian.GenerateTree(tree, 20000, 1)
	if err != nil {
		b.Fatal(err)
	}
	ix, err := librarian.NewIndexer(tree)
	if err != nil {
		b.Fatal(err)
	}
	cpu := eventbench.ProcessCPU()
	for b.Loop() {
		if _, err := ix.Scan(context.Background(), librarian.Known{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(eventbench.ProcessCPU()-cpu)/float64(time.Microsecond)/float64(b.N*len(g.Files)), "cpu-µs/file")
}

// BenchmarkIndexTree is the measured side of the index comparison alone:
// a fresh store indexing every file of a generated tree (read, extract,
// record, fold), what a CPU or allocation profile of indexing should look
// at. It reports the CPU a file takes.
func BenchmarkIndexTree(b *testing.B) {
	dir := b.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		b.Fatal(err)
	}
	g, err := librarian.GenerateTree(tree, 20000, 1)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var cpu time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s, err := openIndexStore(ctx, filepath.Join(dir, fmt.Sprint(i)), tree)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := eventbench.ProcessCPU()
		var events int
		if err := s.update(ctx, nil, &events); err != nil {
			b.Fatal(err)
		}
		cpu += eventbench.ProcessCPU() - start
		b.StopTimer()
		s.close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N*len(g.Files)), "cpu-µs/file")
}

// BenchmarkIndex is the whole benchmark, each comparison's ratio reported
// as a metric (what `sylk bench index` prints, without building sylk).
func BenchmarkIndex(b *testing.B) {
	for b.Loop() {
		cs, _, err := Run(context.Background(), Config{DataDir: b.TempDir()}, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
		for i, unit := range []string{"index/grep", "index-cpu/grep-cpu", "update-p99/budget", "search-p50/budget", "search-p99/budget"} {
			b.ReportMetric(cs[i].Ratio, unit)
		}
	}
}
