// Package eventbench measures Sylk's event log against bare JetStream in the same
// run, and defines the comparison report every `sylk bench` prints.
package eventbench

import (
	"fmt"
	"runtime"
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
}

// Comparison is Sylk's measure beside its baseline's. Ratio is Sylk's speed
// divided by the baseline's (higher is better); Pass says it meets Target.
type Comparison struct {
	Name     string  `json:"name"`
	Sylk     Measure `json:"sylk"`
	Baseline Measure `json:"baseline"`
	Ratio    float64 `json:"ratio"`
	Target   float64 `json:"target"`
	Pass     bool    `json:"pass"`
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
	return fmt.Sprintf("%-48s %10.0f/s vs %10.0f/s  ratio %6.2f %s", c.Name, c.Sylk.PerSec, c.Baseline.PerSec, c.Ratio, verdict)
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
