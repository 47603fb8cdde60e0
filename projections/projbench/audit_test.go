package projbench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sylk/sylk/projections/projbench"
)

// The benchmark runs end to end on a small stream: signed, verified valid,
// both sides measured over the same messages.
func TestAuditVerifyBenchmarkRunsSmall(t *testing.T) {
	cs, err := projbench.AuditVerify(context.Background(), projbench.Config{Dir: t.TempDir(), Events: 1000, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 {
		t.Fatalf("comparisons %v", cs)
	}
	c := cs[0]
	// 1000 events and at least the 10 checkpoints that cover them.
	if c.Sylk.Ops != c.Baseline.Ops || c.Sylk.Ops < 1010 || c.Ratio <= 0 || c.Target != projbench.TargetAuditVerify || !strings.Contains(c.Name, "audit verify") {
		t.Fatalf("comparison %+v", c)
	}
}

// BenchmarkAuditVerify: go test -bench AuditVerify -benchtime 1x ./projections/projbench
// (50k events; sylk bench audit --events N for more).
func BenchmarkAuditVerify(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		cs, err := projbench.AuditVerify(context.Background(), projbench.Config{Dir: dir, Events: 50_000})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cs {
			b.ReportMetric(c.Ratio, "verify_vs_raw_read_ratio")
		}
	}
}
