package pipeline_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// BenchmarkPipelineLoop measures the runtime's overhead per pipeline loop,
// beside BenchmarkLLMStep (agents/llm): review pipelines of the default 3
// loops whose Inspector finds a problem every time, run one after another
// (b.N loops, rounded up to whole pipelines). Each loop is an Engineer stage,
// an Inspector stage and the feedback: two pipeline_stage dispatches, two
// recorded LLM calls, two stage results, an inspector_feedback, four
// consumer hops in a row with their catch-up waits. The overhead is the time
// from each pipeline's first stage to its question to the user (by the
// events' own clocks), minus the time inside the HTTP calls to the fake
// model (which answers at once; no tool runs in a loop), per loop; the
// issue's target is at most 5 ms (ratio-to-5ms-target >= 1).
//
// The baseline, measured in the same run on the same broker, is bare
// JetStream moving the same number of events per loop one at a time: each
// published, acknowledged and delivered to a consumer before the next
// (raw-ms/loop); raw/sylk is its time over the overhead (higher is better),
// which a loaded machine moves less than the overhead alone.
func BenchmarkPipelineLoop(b *testing.B) {
	st := llmtest.NewDiskStack(b)
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
	st.Run(pipeline.Name, &pipeline.Agent{Store: st.Store, Executors: ex}, serial)
	for _, name := range workers {
		st.Run(name, &worker.Worker{Agent: name, Executors: ex, Records: st.Store, Judge: worker.ByExit, Prompter: pl})
	}

	const loops = schemas.DefaultPipelineLoops
	runs := (b.N + loops - 1) / loops
	tm.Reset()
	b.ResetTimer()
	cpu := eventbench.ProcessCPU()
	for i := range runs {
		dag := fmt.Sprintf("d%d", i)
		id := pipeline.ID(dag, "add", 1)
		st.Send("S1", "user", orchestrator.Name, schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: dag,
			Nodes: []schemas.Node{{ID: "add", Agent: "engineer", Prompt: "add Add(a, b int) int", Pipeline: schemas.PipelineReview}}}})
		st.Eventually(time.Minute, "pipeline "+id+" asks the user", func() bool {
			p, err := st.Store.Pipeline(st.Ctx, id)
			return err == nil && p.State == projections.PipelineAwaitingUser
		})
	}
	b.StopTimer()
	cpu = eventbench.ProcessCPU() - cpu
	n := runs * loops

	// Each pipeline's loops run from its first stage's dispatch to its
	// question to the user, by the events' own clocks: the DAG's dispatch
	// and the starting snapshot (a git subprocess: a tool) come before.
	first, last := map[string]time.Time{}, map[string]time.Time{}
	all := st.Events("")
	for _, e := range all {
		switch e.Type {
		case schemas.TypePipelineStage:
			p, err := schemas.PayloadAs[schemas.PipelineStage](e)
			if err != nil {
				b.Fatal(err)
			}
			if first[p.PipelineID].IsZero() {
				first[p.PipelineID] = e.Timestamp
			}
		case schemas.TypePipelineAwaitingUser:
			p, err := schemas.PayloadAs[schemas.PipelineAwaitingUser](e)
			if err != nil {
				b.Fatal(err)
			}
			last[p.PipelineID] = e.Timestamp
		}
	}
	if len(first) != runs || len(last) != runs {
		b.Fatalf("%d pipelines ran stages and %d asked the user, want %d", len(first), len(last), runs)
	}
	var wall time.Duration
	for id, t := range first {
		wall += last[id].Sub(t)
	}
	// The events the loops appended: those inside a pipeline's window.
	inLoops := 0
	for _, e := range all {
		for id, t := range first {
			if !e.Timestamp.Before(t) && !e.Timestamp.After(last[id]) {
				inLoops++
				break
			}
		}
	}
	httpTime, calls := tm.Total()
	if calls != 2*n {
		b.Fatalf("%d LLM calls for %d loops, want %d", calls, n, 2*n)
	}
	perLoop := max(1, inLoops/n)
	raw := rawLoops(b, st, perLoop, n)
	overhead := (wall - httpTime) / time.Duration(n)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(overhead), "overhead-ms/loop")
	b.ReportMetric(ms(httpTime)/float64(n), "http-ms/loop")
	b.ReportMetric(5/ms(overhead), "ratio-to-5ms-target")
	b.ReportMetric(ms(raw), "raw-ms/loop")
	b.ReportMetric(float64(raw)/float64(overhead), "raw/sylk")
	b.ReportMetric(float64(perLoop), "events/loop")
	// The CPU the whole process used per loop (the runtime, the embedded
	// NATS server and the fake model together, each pipeline's start
	// included): what a loaded machine's wall time cannot hide.
	b.ReportMetric(ms(cpu)/float64(n), "cpu-ms/loop")
}

// rawLoops is the baseline of BenchmarkPipelineLoop: perLoop events of a
// few hundred bytes per loop for loops loops, each published to a stream
// configured as Sylk's, acknowledged, and delivered to a pull consumer
// before the next is published. It returns the time per loop.
func rawLoops(b *testing.B, st *llmtest.Stack, perLoop, loops int) time.Duration {
	ctx, js := st.Ctx, st.JetStream()
	cfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	cfg.Name, cfg.Subjects = "BENCH_RAW", []string{"bench.raw.>"}
	stream, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan struct{}, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		got <- struct{}{}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	body := []byte(strings.Repeat("x", 600))
	start := time.Now()
	for range perLoop * loops {
		if _, err := js.Publish(ctx, "bench.raw.hop", body); err != nil {
			b.Fatal(err)
		}
		select {
		case <-got:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-time.After(time.Minute):
			b.Fatal("the raw consumer got nothing for a minute")
		}
	}
	return time.Since(start) / time.Duration(loops)
}
