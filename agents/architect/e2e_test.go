package architect_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/architect"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// model answers as each agent would, from what it is asked: a fake LLM with
// no script, so a replay that called it would be counted, not refused.
func model(req llmtest.Request) llmtest.Reply {
	sys := req.System()
	switch {
	case strings.Contains(sys, "You are the Guide"):
		return llmtest.Text(`{"intent_type": "EXPLICIT", "confidence": 0.9, "reason": "a bounded change",
			"assumptions_explicit": true, "scope_bounded": true, "success_criteria": ["an empty name is an error"]}`)
	case strings.Contains(sys, "You are the Architect"):
		return llmtest.Text(`{"action": "plan", "rationale": "Change the loader, then run the tests.", "confidence": 0.85,
			"plan": {"name": "config validation", "nodes": [
			 {"id": "impl", "agent": "engineer", "prompt": "add input validation to the config loader in config.go"},
			 {"id": "test", "agent": "tester", "tool": "exec", "depends_on": ["impl"],
			  "args": {"command": "grep -q 'name is required' config.go && echo '{\"Action\":\"pass\",\"Package\":\"cfg\",\"Test\":\"TestLoad\"}'", "shell": true}}]}}`)
	case strings.Contains(sys, "You are the Engineer"):
		if req.Messages[len(req.Messages)-1].Role == "user" {
			return llmtest.Tools(llmtest.Call("w1", "write_file",
				`{"path": "config.go", "content": "package cfg\n\n// Load validates: name is required.\nfunc Load(name string) error { return nil }\n"}`))
		}
		return llmtest.Text("Added validation to config.go.")
	}
	return llmtest.Status(400)
}

// agentsFor builds the handlers a server runs, over one LLM client.
func agentsFor(st *llmtest.Stack, c *llm.Client, cat plan.Catalog, specs []tools.ToolSpec) map[string]agents.Handler {
	ex := &worker.Executors{Options: tools.Options{Permissions: tools.DefaultPolicy()}}
	pl := &worker.PromptLoop{LLM: c, Executors: ex, Records: st.Store}
	hs := map[string]agents.Handler{
		guide.Name:        &guide.Guide{Classifier: &guide.LLMClassifier{LLM: c}},
		architect.Name:    &architect.Architect{LLM: c, Store: st.Store, Catalog: cat, Tools: specs},
		orchestrator.Name: &orchestrator.Orchestrator{Store: st.Store, Log: st.Log, Catalog: cat},
	}
	judges := map[string]worker.Judge{"engineer": worker.ByExit, "inspector": worker.ByFindings, "tester": worker.ByTests}
	for name, j := range judges {
		w := &worker.Worker{Agent: name, Executors: ex, Records: st.Store, Judge: j, Prompter: pl}
		if name == "tester" {
			w.Prepare, w.Observe = worker.GoTestJSON, worker.CountTests
		}
		hs[name] = w
	}
	return hs
}

// A request in plain words goes from the Guide to the Architect's plan, is
// approved, executed by the Orchestrator with an Engineer prompt node and a
// Tester tool node, and completes. Run again from the start of the stream
// (every consumer forgotten: a replay), the session makes no LLM call and
// appends nothing new.
func TestRequestToPlanToApprovalToCompletionThenReplay(t *testing.T) {
	st := llmtest.NewStack(t)
	srv := llmtest.New(t)
	srv.Respond(model)
	dir := t.TempDir()
	c, err := llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", Timeout: 5 * time.Second}, llm.Deps{Records: st.Store, Live: st.Broker.Conn()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ex, err := tools.NewExecutor(tools.Options{WorkDir: dir, Permissions: tools.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ex.Schemas() {
		names = append(names, s.Name)
	}
	workers := []string{"engineer", "inspector", "tester"}
	cat := plan.Catalog{ToolAgents: workers, PromptAgents: workers, Tools: names, Allowed: tools.DefaultPolicy().Allows}

	var handled atomic.Int64
	start := func() []func() {
		var stops []func()
		for name, h := range agentsFor(st, c, cat, ex.Schemas()) {
			counted := agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
				handled.Add(1)
				return h.Handle(ctx, d)
			})
			stops = append(stops, st.Run(name, counted, func(o *agents.Options) { o.SkipCancelled = true }))
		}
		return stops
	}
	stops := start()

	st.Send("S1", "user", "user", schemas.TypeSessionCreate, schemas.SessionCreate{Name: "e2e", Config: schemas.SessionConfig{WorkDir: dir}})
	st.Send("S1", "user", "", schemas.TypeUserInput, schemas.UserInput{Text: "add input validation to the config loader"})
	st.Eventually(30*time.Second, "a plan for the user", func() bool { return st.Count(schemas.TypePlanResponse) == 1 })
	planEnv := st.Events(schemas.TypePlanResponse)[0]
	p, _ := schemas.PayloadAs[schemas.PlanResponse](planEnv)
	if len(planEnv.ConfidenceChain) != 2 || planEnv.StructuredIntent.IntentType != guide.IntentExplicit {
		t.Fatalf("plan envelope: chain %+v, intent %+v", planEnv.ConfidenceChain, planEnv.StructuredIntent)
	}
	if st.Count(schemas.TypeDAGExecute) != 0 {
		t.Fatal("executed before approval")
	}
	// The user approves: unaddressed, the Guide routes it to the Architect.
	st.Send("S1", "user", "", schemas.TypePlanApproved, schemas.PlanApproved{PlanID: p.PlanID})
	st.Eventually(60*time.Second, "the workflow completes", func() bool { return st.Count(schemas.TypeWorkflowComplete) == 1 })
	wc := llmtest.Payloads[schemas.WorkflowComplete](st, schemas.TypeWorkflowComplete)[0]
	if wc.Outcome != schemas.OutcomeSucceeded || wc.Succeeded != 2 || wc.DAGID != p.PlanID {
		t.Fatalf("workflow %+v", wc)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config.go")); !strings.Contains(string(b), "name is required") {
		t.Fatalf("config.go = %q", b)
	}
	tr := llmtest.Payloads[schemas.TestResults](st, schemas.TypeTestResults)
	if len(tr) != 1 || tr[0].Passed != 1 {
		t.Fatalf("test results %+v", tr)
	}
	calls := srv.Calls()
	if calls != 4 {
		t.Fatalf("%d LLM calls, want 4 (classify, plan, two engineer steps)", calls)
	}
	for _, name := range append(workers, guide.Name, architect.Name, orchestrator.Name) {
		st.Eventually(10*time.Second, name+" idle", func() bool { return st.Idle(name) })
	}
	before, firstRun := st.Census(), handled.Load()

	// Replay: every agent handles the whole session again from the start.
	for _, stop := range stops {
		stop()
	}
	for _, name := range append(workers, guide.Name, architect.Name, orchestrator.Name) {
		st.Forget(name)
	}
	start()
	for _, name := range append(workers, guide.Name, architect.Name, orchestrator.Name) {
		st.Eventually(30*time.Second, name+" replayed", func() bool { return st.Idle(name) })
	}
	if replayed := handled.Load() - firstRun; replayed < firstRun {
		t.Fatalf("the replay handled %d messages, the first run %d", replayed, firstRun)
	}
	if srv.Calls() != calls {
		t.Fatalf("the replay made %d LLM calls", srv.Calls()-calls)
	}
	if after := st.Census(); after != before {
		t.Fatalf("the replay appended events:\nbefore %s\nafter  %s", before, after)
	}
}
