package eventbench

import (
	"context"
	"testing"

	"github.com/sylk/sylk/broker"
)

// BenchmarkAppend runs the append comparisons once per b.N (use -benchtime 1x)
// and reports each ratio, so `go test -bench` and `sylk bench append` measure
// the same thing.
func BenchmarkAppend(b *testing.B) {
	for b.Loop() {
		cs, err := Append(context.Background(), AppendConfig{DataDir: b.TempDir(), Events: 20000, PerMessageEvents: 1000, Rounds: 2,
			SyncModes: []string{broker.SyncAlways, broker.SyncInterval}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i, c := range cs {
			b.ReportMetric(c.Ratio, metricName(i, c))
		}
	}
}

func metricName(i int, c Comparison) string {
	names := []string{"async/raw_always", "batch/raw_always", "batch/permsg_always", "auth/noauth_always", "async/raw_interval", "batch/raw_interval", "auth/noauth_interval"}
	if i < len(names) {
		return names[i]
	}
	return c.Name
}
