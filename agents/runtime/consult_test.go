package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/archivalist"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// A blocking consultation chain and a refused loop: the Engineer's tool call
// returns the Librarian's answer; the Librarian's own consultation of the
// Archivalist is answered; the Archivalist's consultation back to the
// Librarian is refused as a loop, from the recorded chain; the unknown agent
// and the Librarian consulting the Engineer are refused; everything is
// recorded and summarised for the Archivalist.
func TestConsultationChainAndRefusedLoop(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(scripted.Consultation)
	r := newRig(t, withLLM(t, srv, llm.Config{}))
	t.Cleanup(func() {
		if t.Failed() {
			dumpSession(t, r, "S1")
		}
	})
	if err := os.WriteFile(filepath.Join(r.dir, "config.go"), []byte("package cfg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dag := r.wait(r.submit("S1", `nodes: [{id: ask, agent: engineer, prompt: "find the config loader"}]`))
	if dag.State != projections.DAGSucceeded {
		t.Fatalf("DAG %s", dag.State)
	}
	cs, err := r.store.Consults(r.ctx, "S1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("%d consultations, want 2 (engineer>librarian, librarian>archivalist)", len(cs))
	}
	if c := cs[0]; c.From != "engineer" || c.To != "librarian" || strings.Join(c.Chain, ",") != "engineer" || c.State != projections.ConsultAnswered ||
		!strings.Contains(c.Answer, "config.go, at the root") {
		t.Fatalf("first consultation %+v", c)
	}
	if c := cs[1]; c.From != "librarian" || c.To != "archivalist" || strings.Join(c.Chain, ",") != "engineer,librarian" || c.State != projections.ConsultAnswered {
		t.Fatalf("second consultation %+v", c)
	}
	results := map[string]schemas.ToolResult{}
	for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeToolResult}) {
		p, _ := schemas.PayloadAs[schemas.ToolResult](e)
		results[e.Source+"/"+p.Tool] = *p
	}
	for key, want := range map[string]string{
		"engineer/consult_designer":     `consult: unknown agent "designer"`,
		"librarian/consult_engineer":    "consult only each other",
		"archivalist/consult_librarian": "consultation loop: engineer -> librarian -> archivalist -> librarian",
	} {
		if res := results[key]; res.OK || !strings.Contains(res.Error, want) {
			t.Errorf("%s: ok=%v error %q, want it refused with %q", key, res.OK, res.Error, want)
		}
	}
	if res := results["engineer/consult_librarian"]; !res.OK || !strings.Contains(res.Output, "config.go, at the root") {
		t.Errorf("the engineer's consultation returned %+v", res)
	}
	brokertest.Eventually(t, 10*time.Second, "the consultations are history", func() bool {
		hs, err := r.store.History(r.ctx, projections.HistoryQuery{Session: "S1", Categories: []string{archivalist.CategoryConsultation}})
		return err == nil && len(hs) == 2 && strings.Contains(hs[1].Summary+hs[0].Summary, "engineer -> librarian: where is the config loader?")
	})
}

// A non-blocking consultation: the Engineer asks the Librarian and goes on
// working; the answer, once there, is put into its conversation before a
// later call, and where it was put is recorded (consult_delivered), once.
func TestAsyncConsultationAnswerReachesTheAsker(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(func(req llmtest.Request) llmtest.Reply {
		sys := req.System()
		first := req.Messages[len(req.Messages)-1].Role == "user" && len(req.Messages) == 2
		switch {
		case strings.Contains(sys, "You are the Engineer") && first:
			return llmtest.Tools(llmtest.Call("c1", "consult_librarian", `{"question": "where is the config loader?", "blocking": false}`))
		case strings.Contains(sys, "You are the Engineer"):
			if strings.Contains(req.Last(), "[The librarian answers your consultation") {
				return llmtest.Text("The loader is in config.go, as the Librarian says.")
			}
			return llmtest.Tools(llmtest.Call("s", "exec", `{"argv": ["sleep", "0.3"]}`))
		case strings.Contains(sys, "You are the librarian"):
			return llmtest.Text("config.go, at the root of the module.")
		}
		return llmtest.Status(400)
	})
	// sleep is on the engineer's command list: it runs without asking.
	r := newRig(t, withLLM(t, srv, llm.Config{}), func(c *Config) { c.Tools.Permissions = tools.DefaultPolicy().WithCommands("engineer", "sleep") })
	t.Cleanup(func() {
		if t.Failed() {
			dumpSession(t, r, "S1")
		}
	})
	dag := r.wait(r.submit("S1", `nodes: [{id: ask, agent: engineer, prompt: "find the config loader"}]`))
	if dag.State != projections.DAGSucceeded {
		t.Fatalf("DAG %s", dag.State)
	}
	cs, err := r.store.Consults(r.ctx, "S1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Blocking || cs[0].State != projections.ConsultAnswered || cs[0].Delivered == nil || cs[0].Delivered.Step < 1 {
		t.Fatalf("consultations %+v", cs)
	}
	if n := len(r.events(events.Filter{Session: "S1", Type: schemas.TypeConsultDelivered})); n != 1 {
		t.Fatalf("%d consult_delivered events", n)
	}
	var asked, told bool
	for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeToolResult}) {
		p, _ := schemas.PayloadAs[schemas.ToolResult](e)
		asked = asked || (p.Tool == "consult_librarian" && p.OK && strings.Contains(p.Summary, "comes in a later message"))
	}
	for _, req := range srv.Requests() {
		told = told || (strings.Contains(req.System(), "You are the Engineer") && strings.Contains(req.Last(), "config.go, at the root of the module."))
	}
	if !asked || !told {
		t.Fatalf("asked without waiting: %v; the answer reached the Engineer: %v", asked, told)
	}
}
