package worker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// projectSkill writes a skill into the fixture's project (.sylk/skills).
func (f *promptFixture) projectSkill(name, text string) string {
	f.t.Helper()
	dir := filepath.Join(f.dir, ".sylk", "skills", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return dir
}

const triggeredSkill = `---
name: release-notes
description: How this project writes release notes.
allowed-tools: git_status
metadata:
  agents: engineer
  tier: 2
  load-trigger: changelog|release notes
---
RELEASE NOTES BODY: one line per change, newest first.
`

// A tier-2 skill's body reaches the system prompt only when its trigger
// matches the task, and the selection is recorded with its reason.
func TestTier2SkillLoadsOnlyWhenTriggered(t *testing.T) {
	for _, c := range []struct {
		task string
		want bool
	}{
		{"Update the CHANGELOG for the new version", true},
		{"rename the helper in util.go", false},
		{"add a changelogs index", false}, // word-bounded: "changelogs" is not "changelog"
	} {
		t.Run(c.task, func(t *testing.T) {
			f := newPromptFixture(t, Limits{})
			f.projectSkill("release-notes", triggeredSkill)
			f.srv.Script(llmtest.Text("done"))
			f.worker("engineer", false)
			f.dispatch("engineer", c.task)
			if out := f.outcome("engineer"); out.Type != schemas.TypeTaskComplete {
				t.Fatalf("outcome %s", out.Type)
			}
			sys := f.srv.Requests()[0].System()
			if got := strings.Contains(sys, "RELEASE NOTES BODY"); got != c.want {
				t.Fatalf("body in the system prompt: %v, want %v:\n%s", got, c.want, sys)
			}
			sels := llmtest.Payloads[schemas.SkillsSelected](f.Stack, schemas.TypeSkillsSelected)
			if len(sels) != 1 {
				t.Fatalf("%d selections recorded", len(sels))
			}
			i := slices.IndexFunc(sels[0].Skills, func(s schemas.SelectedSkill) bool { return s.Name == "release-notes" })
			if (i >= 0) != c.want {
				t.Fatalf("selection %+v", sels[0].Skills)
			}
			// Its allowed tool comes with it.
			offered := strings.Join(f.srv.Requests()[0].ToolNames(), ",")
			if strings.Contains(offered, "git_status") != c.want {
				t.Fatalf("tools offered %s", offered)
			}
			if c.want && sels[0].Skills[i].Reason != `tier 2: load trigger matched "changelog"` {
				t.Fatalf("reason %q", sels[0].Skills[i].Reason)
			}
		})
	}
}

// request_tools adds a schema to the next request of the same loop; the load
// is an event and the agent's loadout in the session has it; a refused name
// is told to the model with the reason.
func TestRequestToolsLoadsForTheNextRequest(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	f.srv.Script(
		llmtest.Tools(call("c0", "git_status", `{}`)), // not loaded yet: not run
		llmtest.Tools(call("c1", "request_tools", `{"tools": ["git_status", "teleport"]}`)),
		llmtest.Tools(call("c2", "git_status", `{}`)),
		llmtest.Text("clean"),
	)
	f.worker("engineer", false)
	f.dispatch("engineer", "report the status")
	if out := f.outcome("engineer"); out.Type != schemas.TypeTaskComplete {
		t.Fatalf("outcome %s", out.Type)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls", len(reqs))
	}
	has := func(r llmtest.Request) bool { return slices.Contains(r.ToolNames(), "git_status") }
	if has(reqs[0]) || has(reqs[1]) || !has(reqs[2]) || !has(reqs[3]) {
		t.Fatal("git_status must be offered from the request after request_tools on, not before")
	}
	if m := reqs[1].Messages[len(reqs[1].Messages)-1]; !strings.Contains(m.Content, "not run: git_status is not loaded") {
		t.Fatalf("the model was not told to load git_status: %q", m.Content)
	}
	answer := reqs[2].Messages[len(reqs[2].Messages)-1].Content
	if !strings.Contains(answer, "loaded: git_status") || !strings.Contains(answer, `refused teleport: unknown tool "teleport"`) {
		t.Fatalf("request_tools answered %q", answer)
	}
	loads := llmtest.Payloads[schemas.ToolsLoaded](f.Stack, schemas.TypeToolsLoaded)
	if len(loads) != 2 || loads[0].Via != "start" || loads[1].Via != "request_tools" || !slices.Equal(loads[1].Loaded, []string{"git_status"}) ||
		len(loads[1].Rejected) != 1 {
		t.Fatalf("tools_loaded events %+v", loads)
	}
	f.Eventually(10*time.Second, "the loadout has git_status", func() bool {
		l, err := f.Store.Loadout(context.Background(), "S1", "engineer")
		return err == nil && slices.ContainsFunc(l.Tools, func(x projections.LoadedTool) bool { return x.Name == "git_status" && x.Via == "request_tools" })
	})
}

// A redelivered prompt node reuses the recorded selection: the same skills
// and tools, no skill file read again (the skill is broken before the
// redelivery: reading it would record a load failure), no new LLM call.
func TestRedeliveryReusesSelectedSkillsAndTools(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	skillDir := f.projectSkill("release-notes", triggeredSkill)
	f.srv.Script(
		llmtest.Tools(call("c1", "request_tools", `{"bundle": "search"}`)),
		llmtest.Tools(call("c2", "git_status", `{}`), call("c3", "glob", `{"pattern": "*.md"}`)),
		llmtest.Text("notes written"),
	)
	deliveries := f.worker("engineer", true)
	f.beforeRedelivery = func() { os.WriteFile(filepath.Join(skillDir, "SKILL.md"), []byte("broken now"), 0o644) }
	f.dispatch("engineer", "write the release notes")
	out := f.outcome("engineer")
	if out.Type != schemas.TypeTaskComplete || deliveries.Load() != 2 {
		t.Fatalf("outcome %s after %d deliveries", out.Type, deliveries.Load())
	}
	if f.srv.Calls() != 3 {
		t.Fatalf("%d model calls across two deliveries, want 3", f.srv.Calls())
	}
	sels := llmtest.Payloads[schemas.SkillsSelected](f.Stack, schemas.TypeSkillsSelected)
	if len(sels) != 1 || !slices.ContainsFunc(sels[0].Skills, func(s schemas.SelectedSkill) bool { return s.Name == "release-notes" }) {
		t.Fatalf("selections %+v", sels)
	}
	if n := f.Count(schemas.TypeSkillLoadFailed); n != 0 {
		t.Fatalf("%d load failures: the redelivery read the skills again", n)
	}
	// The redelivery replayed git_status (loaded by the skill) and glob
	// (loaded by request_tools) from their records: both ran once, both
	// are in the evidence of the outcome the second delivery appended.
	done, _ := schemas.PayloadAs[schemas.TaskComplete](out)
	if !strings.Contains(done.Evidence, "git_status:") || !strings.Contains(done.Evidence, "glob:") || strings.Contains(done.Evidence, "not loaded") {
		t.Fatalf("evidence %q", done.Evidence)
	}
	if n := f.Count(schemas.TypeToolResult); n != 3 {
		t.Fatalf("%d tool results, want 3 (request_tools, git_status, glob once each)", n)
	}
	if n := f.Count(schemas.TypeToolsLoaded); n != 2 {
		t.Fatalf("%d tools_loaded events, want 2 (start, request_tools)", n)
	}
}

// Bad skills never stop the agent: a broken SKILL.md, a name the task gives
// that does not exist, an oversized body are each an event with the reason,
// and the node runs with what is left; a tier-3 skill loads when named.
func TestSkillProblemsAreEventsAndTheAgentGoesOn(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	f.pl.Skills.Limits.MaxBodyChars = 40
	f.projectSkill("broken", "---\nname: broken\n---\nno description\n")
	f.projectSkill("long", "---\nname: long\ndescription: long body\nmetadata:\n  tier: 1\n---\n"+strings.Repeat("word ", 40)+"\n")
	f.srv.Script(llmtest.Text("done"))
	f.worker("engineer", false)
	f.Send("S1", "orchestrator", "engineer", schemas.TypeTaskDispatch, schemas.TaskDispatch{
		DAGID: "d1", NodeID: "n1", Attempt: 1, Agent: "engineer", Prompt: "tidy up", WorkDir: f.dir, Skills: []string{"no-such", "refactoring"},
	})
	if out := f.outcome("engineer"); out.Type != schemas.TypeTaskComplete {
		t.Fatalf("outcome %s", out.Type)
	}
	var failed []string
	for _, p := range llmtest.Payloads[schemas.SkillLoadFailed](f.Stack, schemas.TypeSkillLoadFailed) {
		failed = append(failed, p.Name+": "+p.Error)
	}
	if len(failed) != 2 || !strings.Contains(failed[0], "broken: description: missing or empty") ||
		!strings.Contains(failed[1], `no-such: unknown skill: the task names "no-such"`) {
		t.Fatalf("load failures %q", failed)
	}
	var long *schemas.SkillTruncated
	for _, p := range llmtest.Payloads[schemas.SkillTruncated](f.Stack, schemas.TypeSkillTruncated) {
		if p.Name == "long" {
			long = p
		}
	}
	if long == nil || long.Chars != 199 || long.MaxChars != 40 {
		t.Fatalf("truncation of long: %+v", long)
	}
	sys := f.srv.Requests()[0].System()
	if !strings.Contains(sys, "Reading: refactoring") || !strings.Contains(sys, "skill body truncated to 40 characters") {
		t.Fatalf("system prompt:\n%s", sys)
	}
}

// Loaded tools expire: a tool loaded by request_tools stays loaded into the
// session's next nodes while it is used, and a node that starts after it
// went unused (neither called nor loaded again) for longer than the TTL
// starts without it: a tools_unloaded event says why, the loadout lists it as
// unloaded and its schema is not offered. The times are the events' (the
// dispatches' and the runner's clock), so the test runs in no time.
func TestLoadedToolsExpireUnused(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	f.pl.Skills.ToolTTL = 30 * time.Minute
	f.srv.Script(
		llmtest.Tools(call("c1", "request_tools", `{"tools": ["glob", "grep"]}`)),
		llmtest.Tools(call("c2", "glob", `{"pattern": "*"}`)),
		llmtest.Text("n1 done"),
		llmtest.Tools(call("c3", "glob", `{"pattern": "*"}`)),
		llmtest.Text("n2 done"),
		llmtest.Text("n3 done"),
	)
	t0 := time.Now().UTC()
	var offset atomic.Int64
	w := &Worker{Agent: "engineer", Executors: f.pl.Executors, Records: f.Store, Judge: ByExit, Prompter: f.pl}
	f.Run("engineer", agents.HandlerFunc(w.Handle), func(o *agents.Options) {
		o.Now = func() time.Time { return t0.Add(time.Duration(offset.Load())) }
	})
	ctx := context.Background()
	used := func(name string) time.Time {
		l, err := f.Store.Loadout(ctx, "S1", "engineer")
		if err != nil {
			return time.Time{}
		}
		if i := slices.IndexFunc(l.Tools, func(x projections.LoadedTool) bool { return x.Name == name }); i >= 0 {
			return l.Tools[i].Used
		}
		return time.Time{}
	}
	node := func(id string, at time.Duration, done int) {
		t.Helper()
		offset.Store(int64(at))
		env, err := schemas.New(schemas.TypeTaskDispatch, "S1", "orchestrator", "engineer", t0.Add(at),
			schemas.TaskDispatch{DAGID: "d1", NodeID: id, Attempt: 1, Agent: "engineer", Prompt: "look around", WorkDir: f.dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Log.Append(f.Ctx, env); err != nil {
			t.Fatal(err)
		}
		f.Eventually(20*time.Second, "node "+id+" complete", func() bool {
			return f.Count(schemas.TypeTaskComplete) == done && f.Idle("engineer")
		})
	}
	node("n1", 0, 1)
	f.Eventually(10*time.Second, "glob and grep loaded", func() bool { return used("glob").Equal(t0) && used("grep").Equal(t0) })
	node("n2", 20*time.Minute, 2)
	f.Eventually(10*time.Second, "glob used again", func() bool { return used("glob").Equal(t0.Add(20 * time.Minute)) })
	node("n3", 45*time.Minute, 3)
	if f.Count(schemas.TypeTaskFailed) != 0 {
		t.Fatal("a node failed")
	}

	reqs := f.srv.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d model calls", len(reqs))
	}
	n2, n3 := reqs[3].ToolNames(), reqs[5].ToolNames()
	if !slices.Contains(n2, "glob") || !slices.Contains(n2, "grep") {
		t.Fatalf("node 2 (20 minutes on) offered %v: glob and grep are within the TTL", n2)
	}
	if !slices.Contains(n3, "glob") || slices.Contains(n3, "grep") {
		t.Fatalf("node 3 (45 minutes on) offered %v: glob was used 25 minutes before, grep 45", n3)
	}
	un := llmtest.Payloads[schemas.ToolsUnloaded](f.Stack, schemas.TypeToolsUnloaded)
	if len(un) != 1 || un[0].NodeID != "n3" || len(un[0].Tools) != 1 || un[0].Tools[0].Name != "grep" ||
		un[0].Tools[0].Reason != "unused for 45m0s, longer than the TTL of 30m0s (request_tools loads it again)" {
		t.Fatalf("tools_unloaded %+v", un)
	}
	sels := llmtest.Payloads[schemas.SkillsSelected](f.Stack, schemas.TypeSkillsSelected)
	if len(sels) != 3 || !slices.Contains(sels[2].Tools, "glob") || slices.Contains(sels[2].Tools, "grep") || len(sels[2].Unloaded) != 1 {
		t.Fatalf("node 3's selection %+v", sels[len(sels)-1])
	}
	f.Eventually(10*time.Second, "the loadout without grep", func() bool {
		l, err := f.Store.Loadout(ctx, "S1", "engineer")
		return err == nil && len(l.Unloaded) == 1 && l.Unloaded[0].Name == "grep" && l.Unloaded[0].Node == "n3" &&
			!slices.ContainsFunc(l.Tools, func(x projections.LoadedTool) bool { return x.Name == "grep" })
	})
}
