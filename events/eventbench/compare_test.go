package eventbench

import (
	"testing"
	"time"
)

// TestTimeMeasuresCPU: work that burns 20 ms of CPU is measured as at least
// that much, spread over its ops.
func TestTimeMeasuresCPU(t *testing.T) {
	const ops = 100
	m, err := Time("spin", ops, func() error {
		for start := ProcessCPU(); ProcessCPU()-start < 20*time.Millisecond; {
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.CPUPerOp * ops; got < 20000 {
		t.Errorf("CPU measured: %.0f µs in all, want at least 20000 µs", got)
	}
	if m.Ops != ops || m.PerSec <= 0 {
		t.Errorf("measure %+v: want %d ops at a positive rate", m, ops)
	}
}
