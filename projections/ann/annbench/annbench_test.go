package annbench

import (
	"context"
	"testing"
)

// The benchmark runs end to end at a small size and reports every figure;
// probing every list makes the index's recall the exact scan's.
func TestRunSmall(t *testing.T) {
	cs, rep, err := Run(context.Background(), Config{Vectors: 3000, Dims: 32, Queries: 10, K: 5, Probes: 1000}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 6 {
		t.Fatalf("%d comparisons: %+v", len(cs), cs)
	}
	for _, c := range cs {
		if c.Sylk.PerSec <= 0 || c.Baseline.PerSec <= 0 {
			t.Errorf("comparison %q lacks a figure: %+v", c.Name, c)
		}
	}
	if rep.Lists != 30 || rep.Probes != 1000 || rep.Recall != 1 || rep.FilteredRecall != 1 || rep.RareRecall != 1 || rep.ExactMS <= 0 || rep.IndexMS <= 0 || rep.BuildSeconds <= 0 {
		t.Fatalf("report: %+v", rep)
	}
	if cs[1].Ratio != 1 || cs[1].Target != TargetRecall || cs[0].Target != TargetSpeed {
		t.Fatalf("the recall comparison: %+v", cs[1])
	}
	if _, _, err := Run(context.Background(), Config{Vectors: 0, Dims: 32, Queries: 1, K: 1}, func(string) {}); err == nil {
		t.Fatal("no vectors: no error")
	}
}
