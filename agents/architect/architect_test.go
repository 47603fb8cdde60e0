package architect

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// catalog is the runtime's: the three workers, the built-in tools, the
// default permissions.
func catalog(t testing.TB) (plan.Catalog, []tools.ToolSpec) {
	ex, err := tools.NewExecutor(tools.Options{WorkDir: t.TempDir(), Permissions: tools.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ex.Schemas() {
		names = append(names, s.Name)
	}
	workers := []string{"engineer", "inspector", "tester"}
	return plan.Catalog{ToolAgents: workers, PromptAgents: workers, Tools: names, Allowed: tools.DefaultPolicy().Allows}, ex.Schemas()
}

type fixture struct {
	*llmtest.Stack
	t   *testing.T
	srv *llmtest.Server
}

func newFixture(t *testing.T, withLLM bool) *fixture {
	st := llmtest.NewStack(t)
	srv := llmtest.New(t)
	cat, specs := catalog(t)
	a := &Architect{Store: st.Store, Catalog: cat, Tools: specs}
	if withLLM {
		c, err := llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Timeout: 5 * time.Second}, llm.Deps{Records: st.Store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		a.LLM = c
	}
	st.Run(Name, a)
	return &fixture{Stack: st, t: t, srv: srv}
}

func (f *fixture) wait(typ schemas.Type, n int) []*schemas.Envelope {
	f.t.Helper()
	f.Eventually(20*time.Second, "events of type "+string(typ), func() bool { return f.Count(typ) >= n && f.Idle(Name) })
	return f.Events(typ)
}

const validPlan = `{"action": "plan", "rationale": "Validate in the loader, then test.", "confidence": 0.9,
 "plan": {"name": "config validation", "nodes": [
  {"id": "impl", "agent": "engineer", "prompt": "add input validation to LoadConfig in config.go"},
  {"id": "test", "agent": "tester", "tool": "exec", "args": {"argv": ["go", "test", "./..."]}, "depends_on": ["impl"], "timeout": "5m"}]}}`

const invalidPlan = `Here is the plan:
{"action": "plan", "rationale": "r", "plan": {"nodes": [
  {"id": "build", "agent": "engineer", "tool": "compile", "args": {}},
  {"id": "test", "tool": "exec", "args": {"argv": ["go", "test"]}, "depends_on": ["build", "lint"]}]}}`

// An invalid plan goes back to the model with its problems; the valid one is
// put to the user, and its approval sends the DAG to the Orchestrator once.
func TestInvalidPlanIsRepairedThenApprovedOnce(t *testing.T) {
	f := newFixture(t, true)
	f.Send("S1", "user", "user", schemas.TypeSessionCreate, schemas.SessionCreate{Config: schemas.SessionConfig{WorkDir: "/srv/project"}})
	f.srv.Script(llmtest.Text(invalidPlan), llmtest.Text(validPlan))
	f.Send("S1", "guide", Name, schemas.TypePlanRequest, schemas.PlanRequest{Request: "add input validation to the config loader"})
	env := f.wait(schemas.TypePlanResponse, 1)[0]
	resp, _ := schemas.PayloadAs[schemas.PlanResponse](env)
	if resp.PlanID != env.ID || resp.DAG.ID != env.ID || len(resp.DAG.Nodes) != 2 || resp.Rationale == "" || env.Target != "user" {
		t.Fatalf("plan_response %+v", resp)
	}
	if env.StructuredIntent == nil || env.StructuredIntent.OriginalRequest != "add input validation to the config loader" {
		t.Fatalf("intent %+v", env.StructuredIntent)
	}
	if n := len(env.ConfidenceChain); n != 1 || env.ConfidenceChain[0].Agent != Name {
		t.Fatalf("confidence chain %+v", env.ConfidenceChain)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	repair := reqs[1].Last()
	for _, want := range []string{`unknown tool "compile"`, `node "test": agent is missing`, `depends on "lint", which is not a node`} {
		if !strings.Contains(repair, want) {
			t.Fatalf("the repair request lacks %q:\n%s", want, repair)
		}
	}
	if reqs[0].ResponseFormat == nil || !strings.Contains(reqs[0].System(), "exec:") {
		t.Fatal("the planning call did not ask for JSON or did not describe the tools")
	}
	for range 2 {
		f.Send("S1", "user", Name, schemas.TypePlanApproved, schemas.PlanApproved{PlanID: resp.PlanID})
	}
	execs := f.wait(schemas.TypeDAGExecute, 1)
	f.Eventually(10*time.Second, "both approvals handled", func() bool { return f.Idle(Name) })
	if len(f.Events(schemas.TypeDAGExecute)) != 1 {
		t.Fatalf("%d dag_execute events for two approvals, want 1", f.Count(schemas.TypeDAGExecute))
	}
	ex, _ := schemas.PayloadAs[schemas.DAGExecute](execs[0])
	if ex.DAG.ID != resp.PlanID || ex.WorkDir != "/srv/project" || execs[0].Target != "orchestrator" {
		t.Fatalf("dag_execute %+v to %s", ex, execs[0].Target)
	}
}

// A plan that stays invalid is never executed: the user gets the problems.
func TestPlanInvalidAfterRepairsIsRefused(t *testing.T) {
	f := newFixture(t, true)
	f.srv.Script(llmtest.Text(invalidPlan), llmtest.Text(`{"action": "plan"}`), llmtest.Text("not json at all"))
	f.Send("S1", "guide", Name, schemas.TypePlanRequest, schemas.PlanRequest{Request: "do it"})
	n := f.wait(schemas.TypeNotice, 1)[0]
	p, _ := schemas.PayloadAs[schemas.Notice](n)
	if p.Level != schemas.NoticeError || !strings.Contains(p.Text, "no valid plan after 3 tries") || !strings.Contains(p.Text, "not a JSON object") {
		t.Fatalf("notice %+v", p)
	}
	if f.Count(schemas.TypePlanResponse) != 0 || f.Count(schemas.TypeDAGExecute) != 0 || f.srv.Calls() != 3 {
		t.Fatalf("%d plans, %d executions, %d calls", f.Count(schemas.TypePlanResponse), f.Count(schemas.TypeDAGExecute), f.srv.Calls())
	}
}

// A question when the request cannot be planned; the answer brings a plan.
func TestClarificationThenPlan(t *testing.T) {
	f := newFixture(t, true)
	f.srv.Script(llmtest.Text(`{"action": "clarify", "question": "Which loader: config.go or legacy/config.go?", "options": ["A: config.go", "B: legacy"]}`),
		llmtest.Text(validPlan))
	f.Send("S1", "guide", Name, schemas.TypePlanRequest, schemas.PlanRequest{Request: "validate the loader"})
	q := f.wait(schemas.TypeClarificationRequest, 1)[0]
	cr, _ := schemas.PayloadAs[schemas.ClarificationRequest](q)
	if cr.Asker != Name || cr.Context != "validate the loader" || len(cr.Options) != 2 {
		t.Fatalf("clarification %+v", cr)
	}
	f.Send("S1", "guide", Name, schemas.TypeClarificationResponse, schemas.ClarificationResponse{Answer: "A", InReplyTo: q.ID})
	f.wait(schemas.TypePlanResponse, 1)
	last := f.srv.Requests()[1].Last()
	if !strings.Contains(last, "Which loader") || !strings.Contains(last, "They answered: A") || !strings.Contains(last, "validate the loader") {
		t.Fatalf("replanning prompt:\n%s", last)
	}
}

// Feedback brings a new plan that starts from the old one; a rejection drops
// the plan.
func TestModifyAndReject(t *testing.T) {
	f := newFixture(t, true)
	f.srv.Script(llmtest.Text(validPlan), llmtest.Text(validPlan))
	f.Send("S1", "guide", Name, schemas.TypePlanRequest, schemas.PlanRequest{Request: "validate the loader"})
	first := f.wait(schemas.TypePlanResponse, 1)[0]
	f.Send("S1", "user", Name, schemas.TypePlanModified, schemas.PlanModified{PlanID: first.ID, Feedback: "also lint"})
	second := f.wait(schemas.TypePlanResponse, 2)[1]
	last := f.srv.Requests()[1].Last()
	if !strings.Contains(last, "Your previous plan") || !strings.Contains(last, `"id": "impl"`) || !strings.Contains(last, "also lint") {
		t.Fatalf("modification prompt:\n%s", last)
	}
	f.Send("S1", "user", Name, schemas.TypePlanModified, schemas.PlanModified{PlanID: second.ID, Rejected: true})
	n := f.wait(schemas.TypeNotice, 1)[0]
	if p, _ := schemas.PayloadAs[schemas.Notice](n); !strings.Contains(p.Text, "dropped") {
		t.Fatalf("notice %+v", p)
	}
	if f.srv.Calls() != 2 || f.Count(schemas.TypeDAGExecute) != 0 {
		t.Fatalf("%d calls, %d executions", f.srv.Calls(), f.Count(schemas.TypeDAGExecute))
	}
}

func TestNoLLMSaysHowToConfigureOne(t *testing.T) {
	f := newFixture(t, false)
	f.Send("S1", "guide", Name, schemas.TypePlanRequest, schemas.PlanRequest{Request: "anything"})
	n := f.wait(schemas.TypeNotice, 1)[0]
	if p, _ := schemas.PayloadAs[schemas.Notice](n); !strings.Contains(p.Hint, "--llm-model") || p.Level != schemas.NoticeError {
		t.Fatalf("notice %+v", p)
	}
}
