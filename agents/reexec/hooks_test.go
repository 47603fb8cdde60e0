package reexec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/projections"
)

// A session recorded with a hook program re-executes identically without
// running the program: each recorded hook decision is served by its call id
// and applied again, the events the program returned derived again, the
// same. The program is deleted before the re-execution, and it fails closed:
// had it run, the engineer's messages would have been blocked.
func TestReexecuteServesHookDecisions(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "audit.sh")
	if err := os.WriteFile(prog, []byte(`#!/bin/sh
cat >/dev/null
echo run >> "`+filepath.Join(dir, "runs.log")+`"
echo '{"decision": "continue", "events": [{"type": "history_entry", "payload": {"category": "decision", "summary": "the engineer took a message"}}]}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgs := []hooks.Config{{Name: "audit", Point: "pre_message", Agents: []string{"engineer"}, Command: []string{prog}, Fail: "closed"}}
	r := newRigWith(t, func(c *runtime.Config, _ *projections.Store) { c.Hooks = cfgs })
	r.cfg.Hooks = cfgs // the re-execution's agents have the same configuration
	id := r.submit("S1", `
name: two
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [a]}
`)
	if dag := r.wait("S1", id); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s", dag.State)
	}
	runs, err := os.ReadFile(filepath.Join(dir, "runs.log"))
	n := strings.Count(string(runs), "\n")
	if err != nil || n < 2 {
		t.Fatalf("the hook program ran %d times (%v), want once per message the engineer took", n, err)
	}
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}

	rep := r.reexecute("S1", reexec.Options{})
	if !rep.Identical || rep.Divergence != nil {
		t.Fatalf("re-execution diverged: %+v", rep.Divergence)
	}
	// Served: the two tool calls and one decision per program run.
	if rep.CallsMade != 0 || rep.CallsServed != 2+n || len(rep.CallsMissing) != 0 || rep.Events != rep.Recorded {
		t.Fatalf("report %+v, want %d calls served", rep, 2+n)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "runs.log")); string(again) != string(runs) {
		t.Fatalf("the hook program ran during the re-execution: %q", again)
	}
}
