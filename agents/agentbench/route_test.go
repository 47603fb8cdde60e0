package agentbench

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
)

// TestRoute runs the routed-path benchmark small, in the durable mode the
// issue's target is for: every comparison is there, measured (a positive
// ratio), with the targets on Sylk's own lines but the one against raw async
// publish (information: it stores one message where the routed path stores
// three) and none on the bare chain's; the routed path and the bare chain are paired in rounds of every message,
// each side carrying its latencies; and every message made it through.
func TestRoute(t *testing.T) {
	cs, err := Route(context.Background(), RouteConfig{DataDir: t.TempDir(), Messages: 300, LatencyMessages: 100, LatencyRate: 2000, SyncModes: []string{broker.SyncAlways}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 8 {
		t.Fatalf("%d comparisons, want 8: %v", len(cs), cs)
	}
	targets := []float64{TargetDurableThroughput, 0, 0, 1.0 / TargetLatencyFactor, 1.0 / TargetLatencyFactor, 0, 0, eventbench.TargetAuthCost}
	for i, c := range cs {
		if c.Ratio <= 0 || c.Target != targets[i] {
			t.Errorf("%s: ratio %v, target %v; want a ratio > 0 and target %v", c.Name, c.Ratio, c.Target, targets[i])
		}
		if strings.HasPrefix(c.Name, "bare chain ") != (i == 2 || i == 5 || i == 6) {
			t.Errorf("comparison %d is %q", i, c.Name)
		}
	}
	durable := cs[0]
	if !strings.HasPrefix(durable.Name, "durable throughput: routed path vs bare two-hop chain (sync always)") {
		t.Errorf("comparison 0 is %q", durable.Name)
	}
	checkPaired(t, durable, routeRounds, 300)
	for _, m := range []eventbench.Measure{durable.Sylk, durable.Baseline, cs[1].Baseline} {
		if m.P50MS <= 0 || m.P99MS < m.P50MS {
			t.Errorf("%s: latency p50 %v ms, p99 %v ms; want both measured", m.Name, m.P50MS, m.P99MS)
		}
	}
	if cs[1].Sylk != durable.Sylk || cs[2].Sylk != durable.Baseline {
		t.Errorf("the comparisons with raw async publish are not of the paired rounds' totals: %v, %v", cs[1].Sylk, cs[2].Sylk)
	}
	if durable.Sylk.Ops != 900 || cs[3].Sylk.Ops != 100 || cs[5].Sylk.Ops != 100 {
		t.Errorf("ops: routed %d, routed latencies %d, chain latencies %d; want 900 (3 rounds), 100, 100",
			durable.Sylk.Ops, cs[3].Sylk.Ops, cs[5].Sylk.Ops)
	}
	auth := cs[7]
	if !strings.Contains(auth.Name, "auth on") {
		t.Errorf("comparison 7 is %q", auth.Name)
	}
	checkPaired(t, auth, authRounds, 300)
	if durable.Sylk.CPUPerOp <= 0 {
		t.Errorf("routed path: no CPU time per op measured")
	}
}

// checkPaired checks a paired comparison: rounds rounds of n ops a side, the
// side going first alternating, and the ratio a round's (the median).
func checkPaired(t *testing.T, c eventbench.Comparison, rounds, n int) {
	t.Helper()
	if len(c.Rounds) != rounds {
		t.Fatalf("%s: %d rounds, want %d", c.Name, len(c.Rounds), rounds)
	}
	median := false
	for i, r := range c.Rounds {
		if r.Sylk.Ops != n || r.Baseline.Ops != n || r.SylkFirst != (i%2 == 0) || r.Ratio <= 0 {
			t.Errorf("%s: round %d: %d and %d ops, sylk first %v, ratio %v; want %d each, sylk first %v, a ratio", c.Name, i, r.Sylk.Ops, r.Baseline.Ops, r.SylkFirst, r.Ratio, n, i%2 == 0)
		}
		median = median || r.Ratio == c.Ratio
	}
	if !median {
		t.Errorf("%s: ratio %v is none of the rounds' %v", c.Name, c.Ratio, c.Rounds)
	}
}

func TestRetarget(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bench.v1.S1.user.hop0.context_request", "bench.v1.S1.user.hop1.context_request"},
		{"bench.v1.a-long_session.librarian.hop10.x", "bench.v1.a-long_session.librarian.hop1.x"},
	} {
		if got := retarget(tc.in, ".hop1."); got != tc.want {
			t.Errorf("retarget(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// BenchmarkRoute runs the routed-path comparisons once per b.N (use
// -benchtime 1x) and reports each ratio.
func BenchmarkRoute(b *testing.B) {
	for b.Loop() {
		cs, err := Route(context.Background(), RouteConfig{DataDir: b.TempDir(), Messages: 5000, SyncModes: []string{broker.SyncInterval, broker.SyncAlways}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var names []string
		for _, mode := range []string{"interval", "always"} {
			for _, n := range []string{"route/chain", "route/raw", "chain/raw", "p50/raw", "p99/raw", "chain_p50/raw", "chain_p99/raw", "auth/noauth"} {
				names = append(names, n+"_"+mode)
			}
		}
		if len(cs) != len(names) {
			b.Fatalf("%d comparisons, want %d", len(cs), len(names))
		}
		for i, c := range cs {
			b.ReportMetric(c.Ratio, names[i])
			b.Logf("%s", c)
		}
	}
}

// BenchmarkDAG runs a DAG of no-op tool nodes one at a time and in parallel,
// and reports the runtime's overhead per node and nodes per second.
func BenchmarkDAG(b *testing.B) {
	for b.Loop() {
		rep, err := DAG(context.Background(), DAGConfig{DataDir: b.TempDir(), Nodes: 300}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rep.OverheadPerNodeMS, "overhead_ms/node")
		b.ReportMetric(rep.ParallelNodesPerS, "nodes/s")
	}
}

// BenchmarkRoutedPathGrowth measures the CPU per routed message of a
// fresh server's first 25,000 messages and of 25,000 after 250,000 more, the
// projector folding the stream as sylk serve has it, and the live heap then
// (use -benchtime 1x): with the stream's duplicate window (10 minutes,
// longer than the benchmark runs, so every id appended stays in the
// server's table) and with one of 10 seconds, over the same stream. Each
// measure is many collections long, so that the collector's cost is in it
// (each run starts with a collection, outside the measure).
func BenchmarkRoutedPathGrowth(b *testing.B) {
	const measured, between = 25_000, 250_000
	for _, window := range []time.Duration{broker.DefaultDuplicateWindow, 10 * time.Second} {
		b.Run("window="+window.String(), func(b *testing.B) {
			for b.Loop() {
				first, last, heap, err := routedGrowth(context.Background(), b.TempDir(), window, measured, between)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(first.CPUPerOp, "first-cpu-µs/msg")
				b.ReportMetric(last.CPUPerOp, "later-cpu-µs/msg")
				b.ReportMetric(first.CPUPerOp/last.CPUPerOp, "first/later")
				b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
			}
		})
	}
}

// routedGrowth routes n messages on a fresh server whose stream has the
// duplicate window window, with a projector folding them, then between
// more, then n again, and returns the measures of the first and the last n
// and the live heap after them.
func routedGrowth(ctx context.Context, dir string, window time.Duration, n, between int) (first, last eventbench.Measure, heap uint64, err error) {
	b, err := broker.Start(ctx, broker.Options{DataDir: filepath.Join(dir, "broker"), Listen: broker.ListenNone, Sync: broker.SyncInterval, DuplicateWindow: window, Name: "bench"})
	if err != nil {
		return first, last, 0, err
	}
	defer b.Close()
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		return first, last, 0, err
	}
	defer store.Close()
	pctx, stop := context.WithCancel(ctx)
	projector := make(chan error, 1)
	go func() { projector <- store.Projector(events.New(b.JetStream())).Run(pctx) }()
	defer func() { stop(); <-projector }()
	cfg := RouteConfig{Settle: store.WaitFor}
	if first, err = RoutedPath(ctx, cfg, b, n); err != nil {
		return first, last, 0, err
	}
	for routed := 0; routed < between; routed += n {
		if _, err = RoutedPath(ctx, cfg, b, n); err != nil {
			return first, last, 0, err
		}
	}
	if last, err = RoutedPath(ctx, cfg, b, n); err != nil {
		return first, last, 0, err
	}
	var mem runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&mem)
	return first, last, mem.HeapAlloc, nil
}
