//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkExecOverhead runs `true` bare (exec.Command(...).Run()) and
// through Executor.Run, alternating in the same loop so both see the same
// machine state, and reports each one's time per run and their ratio.
func BenchmarkExecOverhead(b *testing.B) {
	e := newTestExecutor(b, nil)
	ctx := context.Background()
	call := Call{ID: "bench", Tool: ToolExec, Args: json.RawMessage(`{"argv":["true"]}`)}
	var bare, layer time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r, err := e.Run(ctx, "engineer", call)
		if err != nil || !r.OK {
			b.Fatalf("%v %+v", err, r)
		}
		layer += time.Since(t1)
		bare += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-ns/run")
	b.ReportMetric(float64(layer.Nanoseconds())/n, "layer-ns/run")
	b.ReportMetric(float64(layer)/float64(bare), "layer/bare")
}

// BenchmarkCaptureFlood measures the capture of a flood of short lines, the
// worst case of per-line work.
func BenchmarkCaptureFlood(b *testing.B) {
	o := Options{WorkDir: "."}
	o.EnsureDefaults()
	det, err := newDetector(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 0, 32<<10)
	for len(chunk)+16 <= cap(chunk) {
		chunk = append(chunk, "ok  \tpkg/x 0.1s\n"...)
	}
	b.SetBytes(int64(len(chunk)))
	c := newCapture(o.Output, det)
	for b.Loop() {
		c.Write(chunk)
	}
}
