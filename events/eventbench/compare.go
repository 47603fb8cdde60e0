// Package eventbench measures Sylk's event log against bare JetStream in the same
// run, and defines the comparison report every `sylk bench` prints.
package eventbench

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Measure is one timed run.
type Measure struct {
	Name        string  `json:"name"`
	Ops         int     `json:"ops"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"per_sec"`
	AllocsPerOp float64 `json:"allocs_per_op,omitempty"`
	BytesPerOp  float64 `json:"bytes_per_op,omitempty"`
	// CPUPerOp is the CPU time, in microseconds, that the whole process (an
	// embedded server's goroutines included) spent per op: on a machine whose
	// cores are all busy, speed is 1/CPUPerOp times the cores, and a ratio of
	// two CPU costs is steadier than one of two wall times.
	CPUPerOp float64 `json:"cpu_us_per_op,omitempty"`
	// StartupSeconds is the time spent getting ready before the measured
	// window (starting a runtime), not in Seconds: reported beside it, so a
	// fixed cost left out of the window is still seen.
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
	// P50MS and P99MS are the latencies, in milliseconds, of a benchmark that
	// samples them beside its throughput (at a steady rate the path
	// sustains, in a run of their own): each side's raw figures in one entry.
	P50MS float64 `json:"p50_ms,omitempty"`
	P99MS float64 `json:"p99_ms,omitempty"`
}

// Comparison is Sylk's measure beside its baseline's. Ratio is Sylk's speed
// divided by the baseline's (higher is better); Pass says it meets Target.
// A paired comparison (see Paired) also lists its rounds, and its Ratio is
// their median.
type Comparison struct {
	Name     string  `json:"name"`
	Sylk     Measure `json:"sylk"`
	Baseline Measure `json:"baseline"`
	Ratio    float64 `json:"ratio"`
	Target   float64 `json:"target"`
	Pass     bool    `json:"pass"`
	Rounds   []Round `json:"rounds,omitempty"`
}

// Round is one round of a paired comparison: both sides measured back to
// back, and their ratio.
type Round struct {
	Sylk      Measure `json:"sylk"`
	Baseline  Measure `json:"baseline"`
	Ratio     float64 `json:"ratio"`
	SylkFirst bool    `json:"sylk_first"`
}

// Paired measures sylk and base in rounds, back to back, the side that goes
// first alternating (sylk base, base sylk, sylk base, ...), and compares them
// by the median of the rounds' ratios. Two sides measured seconds apart see
// the same machine, so a round's ratio is far steadier than either speed on a
// shared machine whose load comes and goes; the median keeps one round caught
// by a burst from deciding, and every round is kept in the result. The
// comparison's Sylk and Baseline are each side's totals over the rounds.
func Paired(name string, rounds int, target float64, sylk, base func(round int) (Measure, error)) (Comparison, error) {
	rs := make([]Round, rounds)
	for i := range rs {
		if err := rs[i].Run(i, func() (Measure, error) { return sylk(i) }, func() (Measure, error) { return base(i) }); err != nil {
			return Comparison{}, err
		}
	}
	return PairedRounds(name, target, rs), nil
}

// Run measures round i of a paired comparison: both sides back to back,
// sylk first in even rounds, base first in odd ones.
func (r *Round) Run(i int, sylk, base func() (Measure, error)) error {
	r.SylkFirst = i%2 == 0
	sides := []struct {
		m  *Measure
		fn func() (Measure, error)
	}{{&r.Sylk, sylk}, {&r.Baseline, base}}
	if !r.SylkFirst {
		sides[0], sides[1] = sides[1], sides[0]
	}
	for _, side := range sides {
		m, err := side.fn()
		if err != nil {
			return err
		}
		*side.m = m
	}
	return nil
}

// RunMirrored measures round i of a paired comparison with each side run
// twice, mirrored: sylk base base sylk in even rounds, base sylk sylk base
// in odd ones; each side's measure is its two runs together (Sum). A cost
// that drifts steadily from one run to the next (a stream that grows with
// every run) then weighs on both sides alike within the round, where in
// Run's order it favours the side that goes first.
func (r *Round) RunMirrored(i int, sylk, base func() (Measure, error)) error {
	var first, second Round
	if err := first.Run(i, sylk, base); err != nil {
		return err
	}
	if err := second.Run(i+1, sylk, base); err != nil {
		return err
	}
	r.SylkFirst = first.SylkFirst
	r.Sylk, r.Baseline = Sum(first.Sylk, second.Sylk), Sum(first.Baseline, second.Baseline)
	return nil
}

// PairedRounds is the comparison of rounds a benchmark paired itself (its
// rounds do more than measure the two sides, in the order Paired does): the
// median of their ratios, each side's totals, and every round.
func PairedRounds(name string, target float64, rs []Round) Comparison {
	for i, r := range rs {
		if r.Baseline.PerSec > 0 {
			rs[i].Ratio = r.Sylk.PerSec / r.Baseline.PerSec
		}
	}
	c := Compare(name, total(rs, func(r Round) Measure { return r.Sylk }), total(rs, func(r Round) Measure { return r.Baseline }), target)
	c.Rounds = rs
	c.Ratio = medianRatio(rs)
	c.Pass = c.Ratio >= target
	return c
}

// medianRatio is the median of the rounds' ratios (the mean of the middle
// two for an even count).
func medianRatio(rs []Round) float64 {
	if len(rs) == 0 {
		return 0
	}
	ratios := make([]float64, len(rs))
	for i, r := range rs {
		ratios[i] = r.Ratio
	}
	slices.Sort(ratios)
	mid := len(ratios) / 2
	if len(ratios)%2 == 0 {
		return (ratios[mid-1] + ratios[mid]) / 2
	}
	return ratios[mid]
}

// total is one side's measures over every round (Sum).
func total(rs []Round, side func(Round) Measure) Measure {
	ms := make([]Measure, len(rs))
	for i, r := range rs {
		ms[i] = side(r)
	}
	return Sum(ms...)
}

// Sum is measures of one side taken together: ops and seconds summed, the
// per-op figures weighted by ops.
func Sum(ms ...Measure) Measure {
	var t Measure
	for _, m := range ms {
		t.Name = m.Name
		t.Ops += m.Ops
		t.Seconds += m.Seconds
		t.AllocsPerOp += m.AllocsPerOp * float64(m.Ops)
		t.BytesPerOp += m.BytesPerOp * float64(m.Ops)
		t.CPUPerOp += m.CPUPerOp * float64(m.Ops)
		t.StartupSeconds += m.StartupSeconds
	}
	if t.Ops > 0 {
		t.AllocsPerOp /= float64(t.Ops)
		t.BytesPerOp /= float64(t.Ops)
		t.CPUPerOp /= float64(t.Ops)
	}
	if t.Seconds > 0 {
		t.PerSec = float64(t.Ops) / t.Seconds
	}
	return t
}

// Compare builds the comparison of sylk against base with a target ratio; a zero
// target marks a comparison reported for information.
func Compare(name string, sylk, base Measure, target float64) Comparison {
	c := Comparison{Name: name, Sylk: sylk, Baseline: base, Target: target}
	if base.PerSec > 0 {
		c.Ratio = sylk.PerSec / base.PerSec
	}
	c.Pass = c.Ratio >= target
	return c
}

func (c Comparison) String() string {
	verdict := fmt.Sprintf("(target >= %.2f) ok", c.Target)
	switch {
	case c.Target == 0:
		verdict = "(for information)"
	case !c.Pass:
		verdict = fmt.Sprintf("(target >= %.2f) BELOW TARGET", c.Target)
	}
	line := fmt.Sprintf("%-48s %10.0f/s vs %10.0f/s  ratio %6.2f %s", c.Name, c.Sylk.PerSec, c.Baseline.PerSec, c.Ratio, verdict)
	if len(c.Rounds) == 0 {
		return line
	}
	ratios := make([]string, len(c.Rounds))
	for i, r := range c.Rounds {
		ratios[i] = fmt.Sprintf("%.2f", r.Ratio)
	}
	return fmt.Sprintf("%s\n    ratio: median of %d paired rounds: %s", line, len(c.Rounds), strings.Join(ratios, " "))
}

// Faster returns the faster of two measures; a zero Measure loses. A
// benchmark of several rounds keeps each side's best.
func Faster(a, b Measure) Measure {
	if a.PerSec >= b.PerSec {
		return a
	}
	return b
}

// Time runs fn, which performs ops operations, and measures it with its
// allocations and the process's CPU time.
func Time(name string, ops int, fn func() error) (Measure, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu0 := ProcessCPU()
	start := time.Now()
	err := fn()
	elapsed := time.Since(start)
	cpu := ProcessCPU() - cpu0
	runtime.ReadMemStats(&after)
	m := Measure{Name: name, Ops: ops, Seconds: elapsed.Seconds()}
	if elapsed > 0 {
		m.PerSec = float64(ops) / elapsed.Seconds()
	}
	if ops > 0 {
		m.AllocsPerOp = float64(after.Mallocs-before.Mallocs) / float64(ops)
		m.BytesPerOp = float64(after.TotalAlloc-before.TotalAlloc) / float64(ops)
		m.CPUPerOp = float64(cpu) / float64(time.Microsecond) / float64(ops)
	}
	return m, err
}
