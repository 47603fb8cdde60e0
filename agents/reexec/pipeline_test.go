package reexec_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// A review pipeline whose Engineer fills 95% of a small window and hands
// its pipeline off (a memory checkpoint, pipeline_handoff, a new pipeline
// at the same loop whose Engineer writes the file; the Inspector passes)
// re-executes identically from the recording, with the model never called.
func TestReexecutePipelineWithHandoff(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(scripted.Handoff(nil))
	conf := llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Timeout: 5 * time.Second, MaxContextTokens: 6000, ReserveTokens: 500}
	r := newLLMRig(t, conf)
	if err := os.WriteFile(filepath.Join(r.dir, "big.txt"), []byte(scripted.BigFile), 0o644); err != nil {
		t.Fatal(err)
	}
	id := r.submit("S1", "name: add\nnodes:\n  - {id: add, agent: engineer, prompt: add Add to calc, pipeline: review}\n")
	if dag := r.wait("S1", id); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s: %+v", dag.State, dag.Node("add"))
	}
	r.seqOf("S1", func(env *schemas.Envelope) bool { return env.Type == schemas.TypePipelineHandoff })
	ps, err := r.store.Pipelines(r.ctx, projections.PipelineFilter{Session: "S1"})
	if err != nil || len(ps) != 2 || ps[0].State != projections.PipelineHandedOff || ps[1].State != projections.PipelineCompleted {
		t.Fatalf("pipelines %v: want one handed off, its successor completed", err)
	}
	// The same window, so the handoff falls at the same call.
	r.identical(srv, "S1", conf)
}
