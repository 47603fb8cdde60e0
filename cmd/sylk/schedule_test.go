package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// TestSchedule adds a schedule to a running `sylk serve` and watches it
// fire: each firing runs the plan in a session of its own, on the direct
// tier, and its outcome is the schedule's.
func TestSchedule(t *testing.T) {
	bin := sylkBinary(t)
	dir := t.TempDir()
	data, work := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "tick.yaml"), []byte(`name: tick
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo tick >> ticks.txt"]}}
`), 0o644)
	srv := startServe(t, bin, data, work)
	defer srv.stop(t)
	sylk := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--data", data}, args...)...)
		cmd.Dir = work
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sylk %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	sylk("schedule", "add", "tick", "--every", "1s", "tick.yaml")

	var sc projections.Schedule
	brokertest.Eventually(t, 60*time.Second, "two runs of the schedule succeeded", func() bool {
		if err := json.Unmarshal(sylk("schedule", "show", "tick", "--json"), &sc); err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, r := range sc.Runs {
			if r.Outcome == schemas.OutcomeSucceeded {
				ok++
			}
		}
		return ok >= 2
	})
	sessions := map[string]bool{}
	for _, r := range sc.Runs {
		if r.Session == "" || sessions[r.Session] {
			t.Errorf("run %+v: each firing has a session of its own", r)
		}
		sessions[r.Session] = true
	}
	sylk("schedule", "pause", "tick")
	ticks, _ := os.ReadFile(filepath.Join(work, "ticks.txt"))
	if n := strings.Count(string(ticks), "tick\n"); n < 2 {
		t.Errorf("%d ticks in the work directory, want at least 2", n)
	}
	// The direct tier: no LLM event in the whole stream.
	if out := sylk("tail", "--no-follow", "--type", "llm_request"); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("LLM events in a direct-tier schedule's runs:\n%s", out)
	}
	if out := string(sylk("schedule", "ls")); !strings.Contains(out, "tick") || !strings.Contains(out, "paused") {
		t.Errorf("schedule ls:\n%s", out)
	}
}
