package pipeline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// smallWindow is a context window an Engineer that reads scripted.BigFile a few
// times fills to 95%: the point of its handoff.
func smallWindow(_ *fixture, c *llm.Config) { c.MaxContextTokens, c.ReserveTokens = 6000, 500 }

// maxHandoffs caps the fixture's chains of handoffs at n.
func maxHandoffs(n int) option { return func(f *fixture, _ *llm.Config) { f.maxHandoffs = n } }

// engineerState is the Engineer's typed state, the answer to a memory
// checkpoint (a handoff's, or a compaction's summary).
const engineerState = `{"original_prompt": "add Add", "accomplished": ["read big.txt"], "files_changed": [], "remaining": ["write Add in calc.go"], "context_notes": "calc.go holds package calc"}`

// chainCall is what a request of a chain of handoffs is: who asks (engineer,
// inspector, or memory for a checkpoint), in which pipeline of the chain (0
// the first, n the one after handoff n), at which loop and step, for which
// variant approach, whether the conversation was compacted and whether it
// wrote a file.
type chainCall struct {
	agent            string
	handoff          int
	loop             int
	step             int
	approach         string
	compacted, wrote bool
}

var handoffLine = regexp.MustCompile(`Pipeline handoff (\d+):`)

func chainOf(req llmtest.Request) chainCall {
	c := chainCall{agent: scripted.AgentOf(req)}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			c.step++
			for _, tc := range m.ToolCalls {
				c.wrote = c.wrote || tc.Function.Name == "write_file"
			}
		}
		if sm := handoffLine.FindStringSubmatch(m.Content); sm != nil && m.Role == "user" {
			c.handoff, _ = strconv.Atoi(sm[1])
		}
		if _, loop, ok := scripted.StageIn(m.Content); ok && m.Role == "user" && c.loop == 0 {
			c.loop = loop
		}
		if approach, ok := scripted.ApproachIn(m.Content); ok && m.Role == "user" {
			c.approach = approach
		}
		c.compacted = c.compacted || strings.Contains(m.Content, "[Memory checkpoint")
	}
	return c
}

// inspectAndPass is an Inspector that reads calc.go and passes.
func inspectAndPass(c chainCall) llmtest.Reply {
	if c.step == 0 {
		return scripted.Tool("r", "read_file", `{"path": "calc.go"}`)
	}
	return scripted.Verdict(true, "Add is there")
}

// compactingModel answers a chain whose Engineers may not all hand off: an
// Engineer reads (read) until its window fills; once its conversation is
// compacted it writes calc.go and is done; checkpoints answer with the
// Engineer's state and the Inspector passes.
func compactingModel(t *testing.T, read llmtest.Reply) func(llmtest.Request) llmtest.Reply {
	return chainModel(t, func(c chainCall) (llmtest.Reply, bool) {
		switch {
		case c.compacted && !c.wrote:
			return scripted.WriteFile("w", "calc.go", scripted.RightAdd), true
		case c.compacted:
			return llmtest.Text("Wrote Add after compacting."), true
		}
		return read, true
	})
}

// chainModel answers a chain test's requests: checkpoints with the
// Engineer's state, an Inspector that reads calc.go and passes, and the
// Engineer's calls by engineer (false: a request the test did not expect).
func chainModel(t *testing.T, engineer func(c chainCall) (llmtest.Reply, bool)) func(llmtest.Request) llmtest.Reply {
	return func(req llmtest.Request) llmtest.Reply {
		c := chainOf(req)
		switch c.agent {
		case "memory":
			return llmtest.Text(engineerState)
		case "inspector":
			return inspectAndPass(c)
		case "engineer":
			if r, ok := engineer(c); ok {
				return r
			}
		}
		t.Errorf("unexpected request %+v: %q", c, req.Last())
		return llmtest.Status(400)
	}
}

// waitFor is an exec call that waits until the file gate exists, then runs
// then (a shell command, or "").
func waitFor(gate, then string) llmtest.Reply {
	cmd := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; %s", gate, then)
	return scripted.Tool("g", "exec", fmt.Sprintf(`{"command": %q, "shell": true, "timeout": 60}`, cmd))
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// stagePrompts are the prompts of a pipeline's dispatched stages, by stage
// and loop ("implement/1").
func (f *fixture) stagePrompts(id string) map[string]string {
	out := map[string]string{}
	for _, e := range f.Events(schemas.TypePipelineStage) {
		if st, _ := schemas.PayloadAs[schemas.PipelineStage](e); st.PipelineID == id {
			out[fmt.Sprintf("%s/%d", st.Stage, st.Loop)] = st.Prompt
		}
	}
	return out
}

// successor waits for pipeline id to be handed off and its successor to
// start, and returns the successor.
func (f *fixture) successor(id string) *projections.Pipeline {
	f.t.Helper()
	var next *projections.Pipeline
	f.Eventually(60*time.Second, "pipeline "+id+" handed off", func() bool {
		pl, err := f.Store.Pipeline(f.Ctx, id)
		if err != nil || pl.State != projections.PipelineHandedOff {
			return false
		}
		next, err = f.Store.Pipeline(f.Ctx, pl.HandoffTo)
		return err == nil
	})
	return next
}

// /task messages follow the work across a handoff: one sent while the first
// Engineer works and never given to it is carried to the new pipeline's
// first stage; one sent to the old pipeline's id after the handoff reaches
// the new pipeline, whose Engineer hears it in one more loop. Nothing is
// refused, and a replay calls nothing and appends nothing.
func TestTaskMessagesFollowTheHandoff(t *testing.T) {
	f := newFixture(t, smallWindow)
	f.write("big.txt", scripted.BigFile)
	gates := t.TempDir()
	before, after := filepath.Join(gates, "before"), filepath.Join(gates, "after")
	f.srv.Respond(chainModel(t, func(c chainCall) (llmtest.Reply, bool) {
		switch {
		case c.handoff == 0:
			return waitFor(before, "cat big.txt"), true
		case c.loop == 1 && c.step == 0:
			return waitFor(after, ""), true
		case c.loop == 1 && c.step == 1:
			return scripted.WriteFile("w", "calc.go", scripted.RightAdd), true
		}
		return llmtest.Text(fmt.Sprintf("Wrote Add (loop %d).", c.loop)), true
	}))
	f.submit(schemas.PipelineReview, "add Add(a, b int) int to calc")
	first := f.pipelineOf("add")
	f.Send("S1", "user", pipeline.Name, schemas.TypeUserTaskPrompt, schemas.UserTaskPrompt{PipelineID: first.ID, Text: "name the parameters a and b"})
	f.Eventually(30*time.Second, "the first pipeline holds the message", func() bool { return len(f.pipeline(first.ID).UserMessages) == 1 })
	touch(t, before)

	next := f.successor(first.ID)
	// The new pipeline's first stage, which gives its Engineer the message,
	// follows its start.
	f.Eventually(30*time.Second, "the new pipeline's first stage", func() bool { return f.pipeline(next.ID).Stage != "" })
	next = f.pipeline(next.ID)
	if len(next.UserMessages) != 1 || next.UserMessages[0].Text != "name the parameters a and b" || next.Delivered != 1 {
		t.Fatalf("the new pipeline's messages %+v (delivered %d): want the one the first Engineer was never given", next.UserMessages, next.Delivered)
	}
	// Sent to the old id: the projection gives it to the new pipeline.
	f.Send("S1", "user", pipeline.Name, schemas.TypeUserTaskQuery, schemas.UserTaskQuery{PipelineID: first.ID, Text: "is Add documented?"})
	f.Eventually(30*time.Second, "the new pipeline holds the second message", func() bool { return len(f.pipeline(next.ID).UserMessages) == 2 })
	touch(t, after)

	if wc := f.workflow(); wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	next = f.pipeline(next.ID)
	if next.State != projections.PipelineCompleted || next.Loop != 2 || next.Delivered != 2 {
		t.Fatalf("the new pipeline %s at loop %d, %d messages delivered: want completed in a second loop that delivered both", next.State, next.Loop, next.Delivered)
	}
	prompts := f.stagePrompts(next.ID)
	if p := prompts["implement/1"]; !strings.Contains(p, "The user says:\n- (prompt) name the parameters a and b") || strings.Contains(p, "is Add documented?") {
		t.Fatalf("the new Engineer's first stage:\n%s", p)
	}
	if p := prompts["implement/2"]; !strings.Contains(p, "- (question (answer it in your report)) is Add documented?") || strings.Contains(p, "name the parameters") {
		t.Fatalf("the new Engineer's second stage:\n%s", p)
	}
	if p := f.stagePrompts(first.ID)["implement/1"]; strings.Contains(p, "The user says") {
		t.Fatalf("the first Engineer was given a message sent after its stage began:\n%s", p)
	}
	if n := f.Count(schemas.TypeNotice); n != 0 {
		t.Fatalf("%d notices: a /task message was refused", n)
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("calc.go:\n%s", got)
	}
	f.replay()
}

// The user stops a pipeline's chain of handoffs while its Engineer works
// (/task PIPELINE stop_handoffs): when the Engineer's window fills it does
// not hand off but summarises and compacts, says so in memory_compacted,
// and finishes in the same pipeline.
func TestUserStopsTheChainOfHandoffs(t *testing.T) {
	f := newFixture(t, smallWindow)
	f.write("big.txt", scripted.BigFile)
	gate := filepath.Join(t.TempDir(), "go-on")
	f.srv.Respond(compactingModel(t, waitFor(gate, "cat big.txt")))
	f.submit(schemas.PipelineReview, "add Add(a, b int) int to calc")
	pl := f.pipelineOf("add")
	f.Send("S1", "user", pipeline.Name, schemas.TypeUserStopHandoffs, schemas.UserStopHandoffs{PipelineID: pl.ID, Text: "keep it in one pipeline"})
	f.Eventually(30*time.Second, "the stop is recorded", func() bool { return f.pipeline(pl.ID).HandoffsStopped != "" })
	if why := f.pipeline(pl.ID).HandoffRefusal(); !strings.Contains(why, "keep it in one pipeline") {
		t.Fatalf("refusal %q", why)
	}
	touch(t, gate)

	if wc := f.workflow(); wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	if n, m := f.Count(schemas.TypePipelineHandoffRequest), f.Count(schemas.TypePipelineHandoff); n != 0 || m != 0 {
		t.Fatalf("%d handoff requests and %d handoffs after the user stopped the chain", n, m)
	}
	comp := llmtest.Payloads[schemas.MemoryCompacted](f.Stack, schemas.TypeMemoryCompacted)
	if len(comp) != 1 || !strings.HasPrefix(comp[0].Reason, "engineer_context_") ||
		!strings.Contains(comp[0].Reason, "no handoff: the user stopped the chain of handoffs (keep it in one pipeline)") {
		t.Fatalf("compactions %+v", comp)
	}
	if pl = f.pipeline(pl.ID); pl.State != projections.PipelineCompleted || pl.HandoffTo != "" {
		t.Fatalf("pipeline %s, handed to %q", pl.State, pl.HandoffTo)
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("calc.go:\n%s", got)
	}
	f.replay()
}

// A chain of handoffs stops at its cap: with a cap of one, the Engineer of
// the pipeline a handoff started compacts when its window fills in turn.
// The stop of an ended chain is refused by the projection.
func TestChainOfHandoffsStopsAtItsCap(t *testing.T) {
	f := newFixture(t, smallWindow, maxHandoffs(1))
	f.write("big.txt", scripted.BigFile)
	f.srv.Respond(compactingModel(t, scripted.Tool("c", "exec", `{"argv": ["cat", "big.txt"]}`)))
	f.submit(schemas.PipelineReview, "add Add(a, b int) int to calc")
	first := f.pipelineOf("add")
	next := f.successor(first.ID)
	if next.MaxHandoffs != 1 || next.Handoff == nil || next.Handoff.HandoffIndex != 1 {
		t.Fatalf("the new pipeline: cap %d, handoff %+v", next.MaxHandoffs, next.Handoff)
	}
	if wc := f.workflow(); wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	if n := f.Count(schemas.TypePipelineHandoff); n != 1 {
		t.Fatalf("%d handoffs, want 1 (the cap)", n)
	}
	comp := llmtest.Payloads[schemas.MemoryCompacted](f.Stack, schemas.TypeMemoryCompacted)
	if len(comp) != 1 || !strings.Contains(comp[0].Reason, "no handoff: the chain made its 1 handoffs (the cap)") {
		t.Fatalf("compactions %+v", comp)
	}
	if next = f.pipeline(next.ID); next.State != projections.PipelineCompleted {
		t.Fatalf("the new pipeline %s", next.State)
	}
	// The chain has ended: a stop is refused, with the reason.
	f.Send("S1", "user", pipeline.Name, schemas.TypeUserStopHandoffs, schemas.UserStopHandoffs{PipelineID: first.ID})
	f.Eventually(30*time.Second, "the late stop is refused", func() bool {
		return f.Count(schemas.TypeNotice) == 1 && strings.Contains(
			llmtest.Payloads[schemas.Notice](f.Stack, schemas.TypeNotice)[0].Text, "is completed; the message was not delivered")
	})
	f.replay()
}

// A variant's Engineer hands its pipeline off: the new pipeline takes the
// variant's place in its group and works on in the variant's worktree.
// Once both variants are ready the user selects the original: the work
// directory keeps it, and the other variant's worktree is gone.
func TestVariantHandsOff(t *testing.T) {
	f := newFixture(t, smallWindow)
	f.write("big.txt", scripted.BigFile)
	gate := filepath.Join(t.TempDir(), "go-on")
	const approach = "count up in a loop"
	counting := "// Package calc adds numbers.\npackage calc\n\n// Add returns a plus b, by counting.\nfunc Add(a, b int) int {\n\tfor ; b > 0; b-- {\n\t\ta++\n\t}\n\treturn a\n}\n"
	f.srv.Respond(chainModel(t, func(c chainCall) (llmtest.Reply, bool) {
		switch {
		case c.approach == "" && c.step == 0:
			return waitFor(gate, ""), true
		case c.approach == "" && c.step == 1:
			return scripted.WriteFile("w", "calc.go", scripted.RightAdd), true
		case c.approach == "":
			return llmtest.Text("Add with +."), true
		case c.handoff == 0:
			return scripted.Tool("c", "exec", `{"argv": ["cat", "big.txt"]}`), true // until the window fills
		case c.handoff == 1 && c.step == 0:
			return scripted.WriteFile("w", "calc.go", counting), true
		case c.handoff == 1:
			return llmtest.Text("Add by counting."), true
		}
		return llmtest.Reply{}, false
	}))
	f.submit(schemas.PipelineReview, "add Add(a, b int) int to calc")
	orig := f.pipelineOf("add")
	f.Send("S1", "user", pipeline.Name, schemas.TypeVariantRequest, schemas.VariantRequest{DAGID: "d1", NodeID: "add", Approach: approach})
	var group *projections.VariantGroup
	f.Eventually(30*time.Second, "the variant runs", func() bool {
		gs, _ := f.Store.VariantGroups(f.Ctx, projections.PipelineFilter{Node: "add"})
		if len(gs) == 1 && gs[0].Variant("v1") != nil {
			group = gs[0]
		}
		return group != nil
	})
	v1 := group.Variant("v1")
	next := f.successor(v1.Pipeline)
	if next.Group != group.ID || next.Variant != "v1" || next.WorkDir != v1.Worktree || next.Approach != approach {
		t.Fatalf("the variant's new pipeline: group %q variant %q in %q (%q), want group %s v1 in %s", next.Group, next.Variant, next.WorkDir, next.Approach, group.ID, v1.Worktree)
	}
	touch(t, gate)
	f.Eventually(60*time.Second, "both variants ready", func() bool {
		g, err := f.Store.VariantGroup(f.Ctx, group.ID)
		return err == nil && g.State == projections.GroupPending
	})
	g, _ := f.Store.VariantGroup(f.Ctx, group.ID)
	if v := g.Variant("v1"); v.Pipeline != next.ID || v.State != projections.VariantReady {
		t.Fatalf("variant v1 %+v: want pipeline %s, ready", v, next.ID)
	}
	if got := f.read(v1.Worktree, "calc.go"); got != counting {
		t.Fatalf("the variant's calc.go:\n%s", got)
	}
	if next = f.pipeline(next.ID); len(next.FilesChanged) != 1 || next.FilesChanged[0] != "calc.go" {
		t.Fatalf("the variant's files %v", next.FilesChanged)
	}
	f.Send("S1", "user", pipeline.Name, schemas.TypeVariantSelect, schemas.VariantSelect{GroupID: group.ID, VariantID: "original"})
	if wc := f.workflow(); wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("calc.go after selecting the original:\n%s", got)
	}
	f.worktreeGone(v1.Worktree)
	g, _ = f.Store.VariantGroup(f.Ctx, group.ID)
	if g.State != projections.GroupSelected || g.Variant("original").State != projections.VariantSelected || g.Variant("v1").State != projections.VariantDiscarded {
		t.Fatalf("group after selection %+v", g)
	}
	if pl := f.pipeline(orig.ID); pl.State != projections.PipelineCompleted {
		t.Fatalf("the original %s", pl.State)
	}
	f.replay()
}

// A handoff whose state the stream refuses (the Engineer's checkpoint, its
// summary twice over, is larger than the server's 8 MiB payload limit)
// falls back to summarise and compact, as the seed says: no handoff, the
// compaction (a second checkpoint, of ordinary size) says why, and the
// Engineer finishes in its pipeline.
func TestHandoffStateNotWrittenCompactsInstead(t *testing.T) {
	f := newFixture(t, smallWindow)
	f.write("big.txt", scripted.BigFile)
	huge := strings.Replace(engineerState, `"read big.txt"`, `"read big.txt`+strings.Repeat(" again", 5<<20/6)+`"`, 1)
	var checkpoints atomic.Int32
	model := compactingModel(t, scripted.Tool("c", "exec", `{"argv": ["cat", "big.txt"]}`))
	f.srv.Respond(func(req llmtest.Request) llmtest.Reply {
		if scripted.AgentOf(req) == "memory" && checkpoints.Add(1) == 1 {
			return llmtest.Text(huge)
		}
		return model(req)
	})
	f.submit(schemas.PipelineReview, "add Add(a, b int) int to calc")
	pl := f.pipelineOf("add")
	if wc := f.workflow(); wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	if n, m := f.Count(schemas.TypePipelineHandoffRequest), f.Count(schemas.TypePipelineHandoff); n != 0 || m != 0 {
		t.Fatalf("%d handoff requests and %d handoffs without a written state", n, m)
	}
	comp := llmtest.Payloads[schemas.MemoryCompacted](f.Stack, schemas.TypeMemoryCompacted)
	if len(comp) != 1 || !strings.HasPrefix(comp[0].Reason, "engineer_context_") ||
		!strings.Contains(comp[0].Reason, "the handoff state could not be written") || !strings.Contains(comp[0].Reason, "maximum payload exceeded") {
		t.Fatalf("compactions %+v", comp)
	}
	if cps := llmtest.Payloads[schemas.MemoryCheckpoint](f.Stack, schemas.TypeMemoryCheckpoint); checkpoints.Load() != 2 || len(cps) != 1 || cps[0].Index != 2 {
		t.Fatalf("%d checkpoint calls, checkpoints written %+v: want the second only", checkpoints.Load(), cps)
	}
	if pl = f.pipeline(pl.ID); pl.State != projections.PipelineCompleted || pl.HandoffTo != "" {
		t.Fatalf("pipeline %s, handed to %q", pl.State, pl.HandoffTo)
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("calc.go:\n%s", got)
	}
	f.replay()
}
