package pipeline_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/archivalist"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// An Engineer whose conversation fills 95% of a small window hands its
// pipeline over (seed L27898-28032): it writes its typed state (a recorded
// checkpoint call), asks for the handoff in place of its stage's result, and
// the pipeline agent closes the old pipeline and starts a new one at the same
// loop, whose Engineer is told what was done and what remains and finishes
// the work. Nothing is compacted or cut; a replay calls nothing and appends
// nothing.
func TestEngineerHandsOffAt95Percent(t *testing.T) {
	f := newFixture(t, smallWindow)
	f.write("big.txt", scripted.BigFile)
	const prompt = "add Add(a, b int) int to calc"
	state := `{"original_prompt": "` + prompt + `", "accomplished": ["read big.txt"], "files_changed": [], "remaining": ["write Add in calc.go"], "context_notes": "calc.go holds package calc"}`
	f.srv.Respond(func(req llmtest.Request) llmtest.Reply {
		answered := slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool { return m.Role == "assistant" })
		switch {
		case strings.Contains(req.System(), "memory checkpoint"):
			return llmtest.Text(state)
		case strings.Contains(req.System(), "You are the Inspector") && answered:
			return scripted.Verdict(true, "Add adds")
		case strings.Contains(req.System(), "You are the Inspector"):
			return scripted.Tool("r", "exec", `{"argv": ["cat", "calc.go"]}`)
		case strings.Contains(req.System(), "You are the Engineer") && strings.Contains(req.Messages[1].Content, "Pipeline handoff 1"):
			if answered {
				return llmtest.Text("Wrote Add.")
			}
			return scripted.WriteFile("w", "calc.go", scripted.RightAdd)
		case strings.Contains(req.System(), "You are the Engineer"):
			return scripted.Tool("c", "exec", `{"argv": ["cat", "big.txt"]}`)
		}
		t.Errorf("unexpected request: %q", req.Last())
		return llmtest.Status(400)
	})
	f.Run(archivalist.Name, &archivalist.Archivalist{Store: f.Store}, func(o *agents.Options) { o.Filters = archivalist.Filters() })
	f.submit(schemas.PipelineReview, prompt)
	if wf := f.workflow(); wf.Succeeded != 1 {
		t.Fatalf("workflow failed: %+v", wf)
	}

	reqs := llmtest.Payloads[schemas.PipelineHandoffRequest](f.Stack, schemas.TypePipelineHandoffRequest)
	hs := llmtest.Payloads[schemas.PipelineHandoff](f.Stack, schemas.TypePipelineHandoff)
	if len(reqs) != 1 || len(hs) != 1 {
		t.Fatalf("%d handoff requests, %d handoffs", len(reqs), len(hs))
	}
	if r := reqs[0]; r.ContextUsage < 0.95 || r.Stage != schemas.StageImplement || r.Loop != 1 || r.Engineer == nil || r.Checkpoint == "" {
		t.Fatalf("handoff request %+v", r)
	}
	h := hs[0]
	if h.HandoffIndex != 1 || h.Loop != 1 || h.Engineer == nil || h.Engineer.OriginalPrompt != prompt ||
		len(h.Engineer.Remaining) != 1 || !strings.HasPrefix(h.Reason, "engineer_context_") {
		t.Fatalf("handoff %+v", h)
	}
	cps := llmtest.Payloads[schemas.MemoryCheckpoint](f.Stack, schemas.TypeMemoryCheckpoint)
	if len(cps) != 1 || cps[0].Kind != schemas.MemoryEngineer || cps[0].Engineer == nil {
		t.Fatalf("checkpoints %+v", cps)
	}
	if n, m := f.Count(schemas.TypeMemoryCompacted), f.Count(schemas.TypeStoreRequest); n != 0 || m != 0 {
		t.Fatalf("the Engineer compacted (%d) or was cut (%d) instead of handing off", n, m)
	}

	old, next := f.pipeline(h.OldPipelineID), f.pipeline(h.NewPipelineID)
	if old.State != projections.PipelineHandedOff || old.HandoffTo != next.ID {
		t.Fatalf("old pipeline %s, handed to %q", old.State, old.HandoffTo)
	}
	if next.State != projections.PipelineCompleted || next.HandoffFrom != old.ID || next.Loop != 1 || next.Handoff == nil {
		t.Fatalf("new pipeline %s from %q at loop %d", next.State, next.HandoffFrom, next.Loop)
	}
	var told string
	for _, e := range f.Events(schemas.TypePipelineStage) {
		if st, _ := schemas.PayloadAs[schemas.PipelineStage](e); st.PipelineID == next.ID && st.Stage == schemas.StageImplement {
			told = st.Prompt
		}
	}
	for _, want := range []string{"Pipeline handoff 1", "Remaining:\n- write Add in calc.go", "Accomplished:\n- read big.txt", prompt} {
		if !strings.Contains(told, want) {
			t.Fatalf("the new Engineer was not told %q:\n%s", want, told)
		}
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("calc.go:\n%s", got)
	}
	// The Archivalist keeps the handoff (category pipeline_handoff).
	f.Eventually(30*time.Second, "the Archivalist keeps the handoff", func() bool {
		es, err := f.Store.History(f.Ctx, projections.HistoryQuery{Session: "S1", Categories: []string{schemas.CategoryPipelineHandoff}})
		return err == nil && len(es) == 1 && strings.Contains(es[0].Summary, next.ID)
	})
	f.replay()
}
