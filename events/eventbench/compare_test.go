package eventbench

import (
	"math"
	"strings"
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

// TestPairedAlternatesAndTakesTheMedian: the side that goes first alternates
// by round, every round is kept, and the ratio is the median of the rounds'
// (one round caught by a burst does not decide it).
func TestPairedAlternatesAndTakesTheMedian(t *testing.T) {
	sylkSpeeds := []float64{90, 100, 30, 110, 95} // round 3 caught by a burst
	var order []string
	side := func(name string, speeds []float64) func(int) (Measure, error) {
		return func(round int) (Measure, error) {
			order = append(order, name)
			return Measure{Name: name, Ops: 100, Seconds: 100 / speeds[round], PerSec: speeds[round]}, nil
		}
	}
	c, err := Paired("x", 5, 0.9, side("sylk", sylkSpeeds), side("base", []float64{100, 100, 100, 100, 100}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "sylk base base sylk sylk base base sylk sylk base"; strings.Join(order, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(order, " "), want)
	}
	if len(c.Rounds) != 5 {
		t.Fatalf("%d rounds kept, want 5", len(c.Rounds))
	}
	for i, r := range c.Rounds {
		if want := sylkSpeeds[i] / 100; math.Abs(r.Ratio-want) > 1e-9 || r.SylkFirst != (i%2 == 0) {
			t.Errorf("round %d: %+v, want ratio %.2f", i, r, want)
		}
	}
	if math.Abs(c.Ratio-0.95) > 1e-9 || !c.Pass {
		t.Errorf("ratio %.3f pass %v, want the median 0.95, passing 0.9", c.Ratio, c.Pass)
	}
	if c.Sylk.Ops != 500 || c.Baseline.Ops != 500 || math.Abs(c.Baseline.PerSec-100) > 1e-9 {
		t.Errorf("totals: sylk %+v, baseline %+v", c.Sylk, c.Baseline)
	}
	if even := PairedRounds("y", 0.9, c.Rounds[:4]); math.Abs(even.Ratio-0.95) > 1e-9 {
		t.Errorf("median of 0.9 1.0 0.3 1.1: %.3f, want 0.95", even.Ratio)
	}
}

// TestRunMirroredCancelsADrift: a mirrored round runs each side twice
// (sylk base base sylk, then base sylk sylk base) and sums each side's
// runs; two equal sides whose cost grows run by run (a stream that grows)
// then compare as equal, where Run's rounds favour the side that goes
// first.
func TestRunMirroredCancelsADrift(t *testing.T) {
	var order []string
	runs := 0
	side := func(name string) func() (Measure, error) {
		return func() (Measure, error) {
			order = append(order, name)
			runs++
			speed := 100 / (1 + 0.05*float64(runs)) // 5% more per run
			return Measure{Name: name, Ops: 100, Seconds: 100 / speed, PerSec: speed}, nil
		}
	}
	rs := make([]Round, 2)
	for i := range rs {
		if err := rs[i].RunMirrored(i, side("sylk"), side("base")); err != nil {
			t.Fatal(err)
		}
	}
	if want := "sylk base base sylk base sylk sylk base"; strings.Join(order, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(order, " "), want)
	}
	c := PairedRounds("x", 0.9, rs)
	for i, r := range c.Rounds {
		if math.Abs(r.Ratio-1) > 1e-9 || r.Sylk.Ops != 200 || r.SylkFirst != (i == 0) {
			t.Errorf("round %d: ratio %.4f, %d ops, sylk first %v: want 1, 200, %v", i, r.Ratio, r.Sylk.Ops, r.SylkFirst, i == 0)
		}
	}
	// The same runs in Run's order: the side that goes first looks faster.
	order, runs = nil, 0
	var plain Round
	if err := plain.Run(0, side("sylk"), side("base")); err != nil {
		t.Fatal(err)
	}
	if plain.Sylk.PerSec <= plain.Baseline.PerSec {
		t.Errorf("Run's order: sylk %.2f/s, base %.2f/s: want the drift to favour sylk, first", plain.Sylk.PerSec, plain.Baseline.PerSec)
	}
}
