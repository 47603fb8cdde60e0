package runtime

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// withLLM gives the rig's agents an LLM client on srv.
func withLLM(t *testing.T, srv *llmtest.Server, cfg llm.Config) func(*Config) {
	return func(c *Config) {
		cfg.BaseURL, cfg.Model = srv.URL(), "fake"
		if cfg.Timeout == 0 {
			cfg.Timeout = 5 * time.Second
		}
		cl, err := llm.NewClient(cfg, llm.Deps{Records: c.Store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		c.LLM = cl
	}
}

// Plan mode from enter to completed: the Architect explores (its write is
// refused), drafts a plan with a cycle (sent back), puts v1 to the user; a
// message typed meanwhile is held; the user modifies (v2, the held message
// released), then approves; the DAG runs and the plan's steps and todos
// follow it to completed.
func TestPlanModeFromEnterToCompleted(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(scripted.PlanMode)
	r := newRig(t, withLLM(t, srv, llm.Config{}))
	work := t.TempDir()
	orig := "package cfg\n\nfunc Load(name string) error { return nil }\n"
	if err := os.WriteFile(filepath.Join(work, "config.go"), []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	send := func(t_ schemas.Type, p any) {
		t.Helper()
		e, err := schemas.New(t_, "S1", "user", "", time.Now(), p)
		if err != nil {
			t.Fatal(err)
		}
		r.append(e)
	}
	planState := func(want string) *projections.PlanMode {
		t.Helper()
		var pm *projections.PlanMode
		brokertest.Eventually(t, 30*time.Second, "plan mode "+want, func() bool {
			var err error
			pm, err = r.store.PlanMode(r.ctx, "S1")
			return err == nil && pm.State == want
		})
		return pm
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpSession(t, r, "S1")
		}
	})
	send(schemas.TypeSessionCreate, schemas.SessionCreate{Name: "plan", Config: schemas.SessionConfig{WorkDir: work}})
	send(schemas.TypeUserInput, schemas.UserInput{Text: "/plan mode on"})
	planState(schemas.PlanExploring)
	send(schemas.TypeUserInput, schemas.UserInput{Text: "/plan add input validation to the config loader"})
	pm := planState(schemas.PlanAwaitingApproval)
	if pm.Version != 1 || pm.Current().Plan.Title != "validate config" {
		t.Fatalf("v1: %+v", pm)
	}
	var states []string
	for _, tr := range pm.Transitions {
		states = append(states, tr.To)
	}
	if got := strings.Join(states, ">"); got != "exploring>drafting>exploring>drafting>awaiting_approval" {
		t.Fatalf("transitions %s", got)
	}
	// The write while exploring was refused, with the reason, and nothing changed.
	var refused bool
	for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeToolResult}) {
		res, _ := schemas.PayloadAs[schemas.ToolResult](e)
		if res.Tool == "write_file" {
			refused = !res.OK && strings.Contains(res.Error, "plan mode (exploring)") && strings.Contains(res.Error, "write_file changes files")
		}
	}
	if b, _ := os.ReadFile(filepath.Join(work, "config.go")); !refused || string(b) != orig {
		t.Fatalf("write while exploring: refused=%v, config.go = %q", refused, b)
	}
	explore := r.events(events.Filter{Session: "S1", Type: schemas.TypePlanExplore})
	if len(explore) != 1 {
		t.Fatalf("%d plan_explore events", len(explore))
	}
	if p, _ := schemas.PayloadAs[schemas.PlanExplore](explore[0]); !strings.Contains(strings.Join(p.Problems, ";"), "dependency cycle") {
		t.Fatalf("plan_explore %+v", p)
	}

	// A request typed while the plan awaits approval is held.
	send(schemas.TypeUserInput, schemas.UserInput{Text: "also log the error"})
	brokertest.Eventually(t, 10*time.Second, "the message is held", func() bool {
		pm, err := r.store.PlanMode(r.ctx, "S1")
		return err == nil && len(pm.Held) == 1
	})
	v1 := pm.PlanID
	send(schemas.TypePlanModified, schemas.PlanModified{PlanID: v1, Feedback: "have the inspector review it"})
	pm = planState(schemas.PlanAwaitingApproval)
	brokertest.Eventually(t, 10*time.Second, "v2", func() bool {
		pm, _ = r.store.PlanMode(r.ctx, "S1")
		return pm.Version == 2 && pm.State == schemas.PlanAwaitingApproval
	})
	if len(pm.Held) != 0 || pm.Versions[0].Outcome != "modified" {
		t.Fatalf("after modify: held %v, v1 %+v", pm.Held, pm.Versions[0])
	}
	brokertest.Eventually(t, 10*time.Second, "the held message is handled", func() bool {
		return len(r.events(events.Filter{Session: "S1", Type: schemas.TypeClarificationRequest})) == 1
	})

	// Approving v1, which v2 replaced, is refused: nothing runs.
	send(schemas.TypePlanApproved, schemas.PlanApproved{PlanID: v1})
	brokertest.Eventually(t, 10*time.Second, "the approval of v1 refused", func() bool {
		for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeNotice}) {
			if n, _ := schemas.PayloadAs[schemas.Notice](e); strings.Contains(n.Text, "plan "+v1+" is not awaiting approval") {
				return true
			}
		}
		return false
	})
	if n := len(r.events(events.Filter{Session: "S1", Type: schemas.TypeDAGExecute})); n != 0 {
		t.Fatalf("%d DAGs dispatched after approving a replaced plan", n)
	}
	send(schemas.TypePlanApproved, schemas.PlanApproved{PlanID: pm.PlanID})
	pm = planState(schemas.PlanCompleted)
	if strings.Join(pm.Steps, ",") != "completed,completed" || strings.Join(pm.Todos, ",") != "completed,completed,completed" {
		t.Fatalf("steps %v todos %v", pm.Steps, pm.Todos)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "config.go")); !strings.Contains(string(b), "name is required") {
		t.Fatalf("config.go = %q", b)
	}
	var out strings.Builder
	plan.RenderMode(&out, pm)
	for _, want := range []string{"Plan " + pm.PlanID + " v2", "State: completed", "[x] 1. add the check to config.go (engineer)", "[x] 2. check config.go has the check (inspector) after 1", "[x] Tell the user"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("rendered plan lacks %q:\n%s", want, out.String())
		}
	}
}

// dumpSession logs a session's events, for a test that failed.
func dumpSession(t *testing.T, r *rig, session string) {
	for _, e := range r.events(events.Filter{Session: session}) {
		p, _ := schemas.DecodePayload(e)
		b, _ := json.Marshal(p)
		t.Logf("%s %s>%s %.300s", e.Type, e.Source, e.Target, b)
	}
}
