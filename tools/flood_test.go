//go:build unix && !race

package tools

import (
	"testing"
	"time"
)

// A program that prints 1 GB: counted in full, kept within the bound, done
// in about the time the pipe takes. (Skipped under the race detector, which
// makes it slow; the race run floods 100 MB instead.)
func TestOneGigabyteFlood(t *testing.T) {
	const maxBytes = 1 << 20
	e := newTestExecutor(t, nil)
	start := time.Now()
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "head -c 1000000000 /dev/zero; echo; echo tail line", "shell": true})
	if !r.OK || r.StdoutBytes != 1000000000+1+10 || !r.Truncated {
		t.Fatalf("OK=%v StdoutBytes=%d Truncated=%v", r.OK, r.StdoutBytes, r.Truncated)
	}
	if len(r.Stdout) > maxBytes {
		t.Fatalf("kept %d bytes", len(r.Stdout))
	}
	if r.Stdout[len(r.Stdout)-10:] != "tail line\n" {
		t.Fatalf("tail lost: %q", r.Stdout[len(r.Stdout)-40:])
	}
	t.Logf("1 GB in %v", time.Since(start))
}
