package agentbench

import (
	"context"
	"strings"
	"testing"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events/eventbench"
)

// TestRoute runs the routed-path benchmark small: every comparison is there,
// measured (a positive ratio), with the targets on Sylk's own lines
// and none on the ceilings, and every message made it through.
func TestRoute(t *testing.T) {
	cs, err := Route(context.Background(), RouteConfig{DataDir: t.TempDir(), Messages: 300, LatencyMessages: 100, LatencyRate: 2000, SyncModes: []string{broker.SyncInterval}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 8 {
		t.Fatalf("%d comparisons, want 8: %v", len(cs), cs)
	}
	targets := []float64{TargetRouteThroughput, 0, 0, 1.0 / TargetLatencyFactor, 1.0 / TargetLatencyFactor, 0, 0, eventbench.TargetAuthCost}
	for i, c := range cs {
		if c.Ratio <= 0 || c.Target != targets[i] {
			t.Errorf("%s: ratio %v, target %v; want a ratio > 0 and target %v", c.Name, c.Ratio, c.Target, targets[i])
		}
		if strings.HasPrefix(c.Name, "ceiling:") != (i == 1 || i == 5 || i == 6) {
			t.Errorf("comparison %d is %q", i, c.Name)
		}
	}
	if cs[0].Sylk.Ops != 300 || cs[1].Sylk.Ops != 300 || cs[3].Sylk.Ops != 100 || cs[5].Sylk.Ops != 100 {
		t.Errorf("ops: routed %d, chain %d, routed latencies %d, chain latencies %d; want 300, 300, 100, 100",
			cs[0].Sylk.Ops, cs[1].Sylk.Ops, cs[3].Sylk.Ops, cs[5].Sylk.Ops)
	}
	// The auth comparison pairs its rounds: every message in each, the side
	// going first alternating, and the ratio is a round's (the median).
	auth := cs[7]
	if !strings.Contains(auth.Name, "auth on") || len(auth.Rounds) != authRounds {
		t.Fatalf("auth comparison %s: %d rounds, want %d", auth.Name, len(auth.Rounds), authRounds)
	}
	median := false
	for i, r := range auth.Rounds {
		if r.Sylk.Ops != 300 || r.Baseline.Ops != 300 || r.SylkFirst != (i%2 == 0) || r.Ratio <= 0 {
			t.Errorf("auth round %d: %d and %d ops, sylk first %v, ratio %v; want 300 each, sylk first %v, a ratio", i, r.Sylk.Ops, r.Baseline.Ops, r.SylkFirst, r.Ratio, i%2 == 0)
		}
		median = median || r.Ratio == auth.Ratio
	}
	if !median {
		t.Errorf("auth ratio %v is none of the rounds' %v", auth.Ratio, auth.Rounds)
	}
	if cs[0].Sylk.CPUPerOp <= 0 {
		t.Errorf("routed path: no CPU time per op measured")
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
			for _, n := range []string{"route/raw", "chain/raw", "route/chain", "p50/raw", "p99/raw", "chain_p50/raw", "chain_p99/raw", "auth/noauth"} {
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
