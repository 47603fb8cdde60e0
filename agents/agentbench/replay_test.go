package agentbench

import (
	"testing"

	"github.com/sylk/sylk/broker/brokertest"
)

// TestForkAndReexecute runs the fork and re-execution benchmarks small: one
// comparison each, measured on both sides, with the target; the
// re-execution served every tool call from the recording (Reexecute fails if
// the run diverged), and each side's start-up is reported on its own.
func TestForkAndReexecute(t *testing.T) {
	ctx := brokertest.Context(t)
	cs, err := Fork(ctx, ForkConfig{DataDir: t.TempDir(), Short: 10, Long: 300, Forks: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Ratio <= 0 || cs[0].Target != ForkTarget || cs[0].Sylk.Ops != 3 || cs[0].Baseline.Ops != 3 {
		t.Fatalf("fork comparisons %+v", cs)
	}
	cs, err = Reexecute(ctx, ReexecuteConfig{DataDir: t.TempDir(), Nodes: 20, MaxConcurrency: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Ratio <= 0 || cs[0].Target != ReexecuteTarget || cs[0].Sylk.Name != "re-execution (20 calls served, 0 made)" {
		t.Fatalf("re-execution comparisons %+v", cs)
	}
	// Each side's start-up is reported beside its window, not in it; the
	// second comparison, for information, times the re-execution's too.
	re, live, whole := cs[0].Sylk, cs[0].Baseline, cs[1].Sylk
	if re.StartupSeconds <= 0 || live.StartupSeconds <= 0 || cs[1].Target != 0 || whole.StartupSeconds != 0 ||
		whole.Seconds != re.Seconds+re.StartupSeconds || cs[1].Baseline != live {
		t.Fatalf("start-up: re-execution %+v, live %+v, with its start-up %+v", re, live, whole)
	}
}
