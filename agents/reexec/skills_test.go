package reexec_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/projections"
)

const releaseNotesSkill = `---
name: release-notes
description: How this project writes release notes.
allowed-tools: git_status
metadata:
  agents: engineer
  load-trigger: changelog
---
One line per change, newest first.
`

// A prompt node that loaded a project skill (and the tool it allows) and
// more tools by request_tools re-executes identically with zero calls: the
// selection is served from the recording (the skill file is broken since;
// reading it would record a load failure), the tool loads follow from the
// recorded answers, the LLM is never called.
func TestReexecuteReproducesLoadedSkillsAndTools(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(
		llmtest.Tools(llmtest.Call("c1", "request_tools", `{"bundle": "search"}`)),
		llmtest.Tools(llmtest.Call("c2", "git_status", `{}`), llmtest.Call("c3", "glob", `{"pattern": "*.md"}`)),
		llmtest.Text("changelog updated"),
	)
	var client *llm.Client
	r := newRigWith(t, func(c *runtime.Config, store *projections.Store) {
		var err error
		if client, err = llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Backoff: time.Millisecond, Timeout: 5 * time.Second},
			llm.Deps{Records: store}); err != nil {
			t.Fatal(err)
		}
		c.LLM = client
	})
	t.Cleanup(func() { client.Close() })
	dir := filepath.Join(r.dir, ".sylk", "skills", "release-notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(releaseNotesSkill), 0o644); err != nil {
		t.Fatal(err)
	}
	id := r.submit("S1", "name: notes\nnodes:\n  - {id: notes, agent: engineer, prompt: update the changelog}\n")
	if dag := r.wait("S1", id); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s: %+v", dag.State, dag.Node("notes"))
	}
	lo, err := r.store.Loadout(r.ctx, "S1", "engineer")
	if err != nil || !slices.ContainsFunc(lo.Skills, func(s projections.LoadedSkill) bool { return s.Name == "release-notes" }) ||
		!slices.ContainsFunc(lo.Tools, func(x projections.LoadedTool) bool { return x.Name == "glob" && x.Via == "request_tools" }) {
		t.Fatalf("recorded loadout %+v %v", lo, err)
	}
	calls := srv.Calls()
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("broken since"), 0o644); err != nil {
		t.Fatal(err)
	}

	rep := r.reexecute("S1", reexec.Options{})
	if !rep.Identical || rep.Divergence != nil {
		t.Fatalf("re-execution diverged: %+v", rep.Divergence)
	}
	// Served: the selection, three LLM calls, three tool calls.
	if rep.CallsMade != 0 || rep.CallsServed != 7 || len(rep.CallsMissing) != 0 || srv.Calls() != calls {
		t.Fatalf("report %+v; %d LLM calls after the recording's %d", rep, srv.Calls(), calls)
	}
	if rep.Events != rep.Recorded {
		t.Fatalf("compared %d of %d recorded events", rep.Events, rep.Recorded)
	}
}
