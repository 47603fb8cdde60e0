package agentbench

import (
	"context"
	"testing"

	"github.com/sylk/sylk/broker"
)

// BenchmarkRoute runs the routed-path comparisons once per b.N (use
// -benchtime 1x) and reports each ratio.
func BenchmarkRoute(b *testing.B) {
	for b.Loop() {
		cs, err := Route(context.Background(), RouteConfig{DataDir: b.TempDir(), Messages: 5000, SyncModes: []string{broker.SyncInterval, broker.SyncAlways}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		names := []string{"route/raw_interval", "route/hops_interval", "p50/raw_interval", "p99/raw_interval", "route/raw_always", "route/hops_always", "p50/raw_always", "p99/raw_always"}
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
