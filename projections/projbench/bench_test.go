package projbench_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections/projbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The benchmarks run end to end on a small stream and report what they claim
// to: every comparison measured, replay reading exactly the sessions' events.
func TestBenchmarksRunSmall(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	res, err := projbench.Rebuild(ctx, projbench.Config{Dir: dir, Events: 2000, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Comparisons) != 5 || !strings.Contains(res.Comparisons[3].Name, "without audit") || res.Comparisons[3].Target != projbench.TargetAuditRebuild {
		t.Fatalf("rebuild comparisons: %v", res.Comparisons)
	}
	// The audit's round runs each side twice (mirrored); the rebuild vs raw
	// read keeps the best single rebuild.
	if r := res.Comparisons[3].Rounds[0]; r.Sylk.Ops != 2*2000 || r.Baseline.Ops != 2*2000 || res.Comparisons[1].Sylk.Ops != 2000 {
		t.Errorf("audit round %d vs %d events, rebuild %d: want each side's two rebuilds of 2,000, and one rebuild", r.Sylk.Ops, r.Baseline.Ops, res.Comparisons[1].Sylk.Ops)
	}
	for _, c := range res.Comparisons {
		if c.Sylk.PerSec <= 0 || c.Baseline.PerSec <= 0 || c.Ratio <= 0 {
			t.Errorf("comparison not measured: %+v", c)
		}
	}
	if res.Startup.Replayed != 0 {
		t.Errorf("start-up after a clean stop folded %d events, want none", res.Startup.Replayed)
	}
	cs, err := projbench.Replay(ctx, projbench.Config{Dir: dir, Sizes: []int{1000, 2000}, Samples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 || !strings.Contains(cs[2].Name, "vs at 1000") {
		t.Fatalf("replay comparisons: %v", cs)
	}
	for _, c := range cs[:2] {
		if c.Baseline.Ops != 5*projbench.PerSession || c.Sylk.Ops < c.Baseline.Ops || c.Sylk.Ops%projbench.PerSession != 0 || c.Target != projbench.TargetReplay {
			t.Errorf("replay comparison %+v", c)
		}
	}
}

func report(b *testing.B, cs []eventbench.Comparison) {
	for _, c := range cs {
		b.ReportMetric(c.Ratio, strings.ReplaceAll(c.Name, " ", "_")+"_ratio")
	}
}

// BenchmarkRebuild: go test -bench Rebuild -benchtime 1x ./projections/projbench
// (50k events; sylk bench rebuild --events N for more).
func BenchmarkRebuild(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		res, err := projbench.Rebuild(context.Background(), projbench.Config{Dir: dir, Events: 50_000})
		if err != nil {
			b.Fatal(err)
		}
		report(b, res.Comparisons)
	}
}

// BenchmarkReplay: one 50-event session out of 10k and 50k interleaved events.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		cs, err := projbench.Replay(context.Background(), projbench.Config{Dir: dir, Sizes: []int{10_000, 50_000}})
		if err != nil {
			b.Fatal(err)
		}
		report(b, cs)
	}
}
