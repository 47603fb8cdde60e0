package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// A small context window makes the Inspector checkpoint at 85% (a typed
// InspectorFindingsSummary kept by the Archivalist) and compact at 95%: its
// old turns are replaced by the summary, and it finishes from there.
func TestMemoryCheckpointAndCompaction(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(scripted.Memory)
	r := newRig(t, withLLM(t, srv, llm.Config{MaxContextTokens: 6000, ReserveTokens: 500}))
	t.Cleanup(func() {
		if t.Failed() {
			dumpSession(t, r, "S1")
		}
	})
	if err := os.WriteFile(filepath.Join(r.dir, "big.txt"), []byte(strings.Repeat("a line of the file to read\n", 45)), 0o644); err != nil {
		t.Fatal(err)
	}
	dag := r.wait(r.submit("S1", `nodes: [{id: read, agent: inspector, prompt: "read big.txt until you know it"}]`))
	if dag.State != projections.DAGSucceeded {
		t.Fatalf("DAG %s", dag.State)
	}
	cps := r.events(events.Filter{Session: "S1", Type: schemas.TypeMemoryCheckpoint})
	comp := r.events(events.Filter{Session: "S1", Type: schemas.TypeMemoryCompacted})
	if len(cps) == 0 || len(comp) != 1 {
		t.Fatalf("%d checkpoints, %d compactions", len(cps), len(comp))
	}
	cp, _ := schemas.PayloadAs[schemas.MemoryCheckpoint](cps[0])
	if cp.Agent != "inspector" || cp.Kind != schemas.MemoryFindings || cp.ContextUsage < 0.85 || cp.Findings == nil ||
		len(cp.Findings.ChecksPerformed) != 1 || cps[0].Target != "archivalist" {
		t.Fatalf("checkpoint %+v", cp)
	}
	c, _ := schemas.PayloadAs[schemas.MemoryCompacted](comp[0])
	if c.Replaced == 0 || c.TokensAfter >= c.TokensBefore || c.ContextLimit != 6000-500 || c.TokensBefore < c.ContextLimit*95/100 {
		t.Fatalf("compaction %+v", c)
	}
	// The call after the compaction sent the summary in place of the old turns.
	var after *llmtest.Request
	for _, req := range srv.Requests() {
		if strings.Contains(req.System(), "You are the Inspector") {
			for _, m := range req.Messages {
				if strings.Contains(m.Content, "[Memory checkpoint") {
					after = &req
				}
			}
		}
	}
	if after == nil || len(after.Messages) >= c.Replaced+2 {
		t.Fatalf("no compacted request (%v)", after)
	}
	brokertest.Eventually(t, 10*time.Second, "the Archivalist keeps the checkpoint", func() bool {
		hs, err := r.store.History(r.ctx, projections.HistoryQuery{Session: "S1", Categories: []string{schemas.MemoryFindings}})
		return err == nil && len(hs) == len(cps)
	})
}

// An Engineer outside a pipeline (a prompt node) has no pipeline to hand its
// work to at 95% of its window: it falls back to summarise and compact, and
// the compaction says why.
func TestEngineerWithoutPipelineCompactsInstead(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(func(req llmtest.Request) llmtest.Reply {
		sys := req.System()
		switch {
		case strings.Contains(sys, "memory checkpoint"):
			return llmtest.Text(`{"original_prompt": "read big.txt", "accomplished": ["read big.txt"], "remaining": [], "context_notes": ""}`)
		case strings.Contains(sys, "You are the Engineer"):
			for _, m := range req.Messages {
				if strings.Contains(m.Content, "[Memory checkpoint") {
					return llmtest.Text("read it all")
				}
			}
			return llmtest.Tools(llmtest.Call("c", "exec", `{"argv": ["cat", "big.txt"]}`))
		}
		return llmtest.Status(400)
	})
	r := newRig(t, withLLM(t, srv, llm.Config{MaxContextTokens: 6000, ReserveTokens: 500}))
	if err := os.WriteFile(filepath.Join(r.dir, "big.txt"), []byte(strings.Repeat("a line of the file to read\n", 45)), 0o644); err != nil {
		t.Fatal(err)
	}
	dag := r.wait(r.submit("S1", `nodes: [{id: read, agent: engineer, prompt: "read big.txt until you know it"}]`))
	if dag.State != projections.DAGSucceeded {
		t.Fatalf("DAG %s", dag.State)
	}
	if n := len(r.events(events.Filter{Session: "S1", Type: schemas.TypePipelineHandoffRequest})); n != 0 {
		t.Fatalf("%d handoff requests from a prompt node", n)
	}
	comp := r.events(events.Filter{Session: "S1", Type: schemas.TypeMemoryCompacted})
	cps := r.events(events.Filter{Session: "S1", Type: schemas.TypeMemoryCheckpoint})
	if len(comp) != 1 || len(cps) != 1 {
		t.Fatalf("%d compactions, %d checkpoints", len(comp), len(cps))
	}
	c, _ := schemas.PayloadAs[schemas.MemoryCompacted](comp[0])
	cp, _ := schemas.PayloadAs[schemas.MemoryCheckpoint](cps[0])
	if !strings.Contains(c.Reason, "no pipeline to hand off to") || !strings.HasPrefix(c.Reason, "engineer_context_") ||
		c.TokensBefore < c.ContextLimit*95/100 || cp.Kind != schemas.MemoryEngineer || cp.Engineer == nil {
		t.Fatalf("compaction %+v, checkpoint %+v", c, cp)
	}
}
