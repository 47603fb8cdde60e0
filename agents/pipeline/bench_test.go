package pipeline_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// BenchmarkPipelineLoop measures the runtime's overhead per pipeline loop,
// beside BenchmarkLLMStep (agents/llm): a standard pipeline whose Inspector
// finds a problem every time, so each loop is an Engineer stage, an
// Inspector stage and the feedback (two pipeline_stage dispatches, two
// stage results, an inspector_feedback, two recorded LLM calls, five
// consumer hops with their catch-up waits). b.N is the number of loops. The
// overhead is the time from the first stage's dispatch to the question to
// the user, minus the time inside the HTTP calls to the fake model (which
// answers at once; no tool runs in a loop), per loop; the target is
// at most 5 ms. ns/op includes the start (the DAG's dispatch, the git
// snapshot of the work directory).
func BenchmarkPipelineLoop(b *testing.B) {
	st := llmtest.NewStack(b)
	srv := llmtest.New(b)
	srv.Respond(func(req llmtest.Request) llmtest.Reply {
		if strings.Contains(req.System(), "You are the Inspector") {
			return llmtest.Text(`{"passed": false, "summary": "Add subtracts", "issues": ["calc.go:5: returns a - b"]}`)
		}
		return llmtest.Text("Changed Add.")
	})
	tm := llmtest.NewTiming()
	c, err := llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Timeout: 10 * time.Second},
		llm.Deps{Records: st.Store, HTTPClient: &http.Client{Transport: tm}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ex := &worker.Executors{Options: tools.Options{Permissions: tools.DefaultPolicy()}, DefaultDir: b.TempDir()}
	pl := &worker.PromptLoop{LLM: c, Executors: ex, Records: st.Store}
	cat := plan.Catalog{ToolAgents: workers, PromptAgents: workers, Tools: []string{"exec"}}
	serial := func(o *agents.Options) { o.PerSession = 1 }
	st.Run(orchestrator.Name, &orchestrator.Orchestrator{Store: st.Store, Log: st.Log, Catalog: cat}, serial)
	st.Run(pipeline.Name, &pipeline.Agent{Store: st.Store, Log: st.Log, Executors: ex, MaxLoops: b.N}, serial)
	for _, name := range workers {
		st.Run(name, &worker.Worker{Agent: name, Executors: ex, Records: st.Store, Judge: worker.ByExit, Prompter: pl})
	}

	tm.Reset()
	b.ResetTimer()
	cpu := eventbench.ProcessCPU()
	st.Send("S1", "user", orchestrator.Name, schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: "d1",
		Nodes: []schemas.Node{{ID: "add", Agent: "engineer", Prompt: "add Add(a, b int) int", Pipeline: schemas.PipelineStandard}}}})
	st.Eventually(10*time.Minute, "the loops are used", func() bool {
		ps, err := st.Store.Pipelines(st.Ctx, projections.PipelineFilter{State: projections.PipelineAwaitingUser})
		return err == nil && len(ps) == 1
	})
	b.StopTimer()
	cpu = eventbench.ProcessCPU() - cpu
	// The loops run from the first stage's dispatch to the question to the
	// user, by the events' own clocks: the DAG's dispatch and the starting
	// snapshot (a git subprocess: a tool) come before.
	var first, last time.Time
	for _, e := range st.Events("") {
		switch {
		case e.Type == schemas.TypePipelineStage && first.IsZero():
			first = e.Timestamp
		case e.Type == schemas.TypePipelineAwaitingUser:
			last = e.Timestamp
		}
	}
	wall := last.Sub(first)
	httpTime, calls := tm.Total()
	if calls != 2*b.N {
		b.Fatalf("%d LLM calls for %d loops, want %d", calls, b.N, 2*b.N)
	}
	overhead := (wall - httpTime) / time.Duration(b.N)
	b.ReportMetric(float64(overhead.Microseconds())/1000, "overhead-ms/loop")
	b.ReportMetric(float64(httpTime.Microseconds())/1000/float64(b.N), "http-ms/loop")
	b.ReportMetric(5/(float64(overhead.Microseconds())/1000), "ratio-to-5ms-target")
	// The CPU the whole process used per loop (the runtime, the embedded
	// NATS server and the fake model together): what a loaded machine's
	// wall time cannot hide.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/loop")
}
