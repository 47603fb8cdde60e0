package reexec_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// scriptedRig is a rig whose agents ask srv, answering with model, through
// a client configured by conf (its address and model filled in); the
// Engineer runs engineerCommands without asking.
func scriptedRig(t *testing.T, model func(llmtest.Request) llmtest.Reply, conf llm.Config, engineerCommands ...string) (*rig, *llmtest.Server, llm.Config) {
	srv := llmtest.New(t)
	srv.Respond(model)
	conf.BaseURL, conf.Model, conf.NoStream, conf.Timeout = srv.URL(), "fake", true, 5*time.Second
	return newLLMRig(t, conf, engineerCommands...), srv, conf
}

// identical re-executes session and checks it produced every recorded event
// again without calling the model.
func (r *rig) identical(srv *llmtest.Server, session string, conf llm.Config) {
	r.t.Helper()
	calls := srv.Calls()
	rep := r.reexecute(session, reexec.Options{LLM: &conf})
	if !rep.Identical || rep.CallsMade != 0 || rep.Events != rep.Recorded {
		b, _ := json.MarshalIndent(rep.Divergence, "", " ")
		r.t.Fatalf("re-execution: %+v, divergence %s", rep, b)
	}
	if srv.Calls() != calls || rep.CallsServed < calls {
		r.t.Fatalf("model called %d times after the recording's %d; %d calls served", srv.Calls(), calls, rep.CallsServed)
	}
}

// dumpOnFailure logs session's events once the test has failed.
func (r *rig) dumpOnFailure(session string) {
	r.t.Cleanup(func() {
		if !r.t.Failed() {
			return
		}
		page, _ := r.store.SessionLog(r.ctx, projections.LogQuery{Session: session, Limit: 1000})
		for _, e := range page.Entries {
			env, _ := schemas.Unmarshal(e.Data)
			r.t.Logf("%s %s>%s %.300s", env.Type, env.Source, env.Target, env.Payload)
		}
	})
}

// send appends a user's event of session to target ("": the Guide's to
// route).
func (r *rig) send(session, target string, typ schemas.Type, payload any) {
	r.t.Helper()
	e, err := schemas.New(typ, session, "user", target, time.Now(), payload)
	if err != nil {
		r.t.Fatal(err)
	}
	r.append(e)
}

// planMode waits until session's plan mode is in state want.
func (r *rig) planMode(session, want string) *projections.PlanMode {
	r.t.Helper()
	var pm *projections.PlanMode
	brokertest.Eventually(r.t, 30*time.Second, "plan mode "+want, func() bool {
		var err error
		pm, err = r.store.PlanMode(r.ctx, session)
		return err == nil && pm.State == want
	})
	return pm
}

// Plan mode from enter to completed (the Architect's write refused while
// exploring, a plan with a cycle sent back, a message held while v1 awaits
// approval, a modify to v2, an approval of v1 refused, v2's approval and
// its DAG) re-executes
// identically without calling the model.
func TestReexecutePlanModeSession(t *testing.T) {
	r, srv, conf := scriptedRig(t, scripted.PlanMode, llm.Config{})
	r.dumpOnFailure("S1")
	orig := "package cfg\n\nfunc Load(name string) error { return nil }\n"
	if err := os.WriteFile(filepath.Join(r.dir, "config.go"), []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	r.send("S1", "", schemas.TypeSessionCreate, schemas.SessionCreate{Name: "plan", Config: schemas.SessionConfig{WorkDir: r.dir}})
	r.send("S1", "", schemas.TypeUserInput, schemas.UserInput{Text: "/plan mode on"})
	r.planMode("S1", schemas.PlanExploring)
	r.send("S1", "", schemas.TypeUserInput, schemas.UserInput{Text: "/plan add input validation to the config loader"})
	pm := r.planMode("S1", schemas.PlanAwaitingApproval)
	r.send("S1", "", schemas.TypeUserInput, schemas.UserInput{Text: "also log the error"})
	brokertest.Eventually(t, 10*time.Second, "the message is held", func() bool {
		pm, err := r.store.PlanMode(r.ctx, "S1")
		return err == nil && len(pm.Held) == 1
	})
	r.send("S1", "", schemas.TypePlanModified, schemas.PlanModified{PlanID: pm.PlanID, Feedback: "have the inspector review it"})
	brokertest.Eventually(t, 30*time.Second, "v2 awaits approval", func() bool {
		pm, err := r.store.PlanMode(r.ctx, "S1")
		return err == nil && pm.Version == 2 && pm.State == schemas.PlanAwaitingApproval
	})
	// v1, replaced by v2, is refused; then v2 is approved.
	r.send("S1", "", schemas.TypePlanApproved, schemas.PlanApproved{PlanID: pm.PlanID})
	r.send("S1", "", schemas.TypePlanApproved, schemas.PlanApproved{PlanID: r.planMode("S1", schemas.PlanAwaitingApproval).PlanID})
	r.planMode("S1", schemas.PlanCompleted)
	r.idle()
	if b, _ := os.ReadFile(filepath.Join(r.dir, "config.go")); !strings.Contains(string(b), "name is required") {
		t.Fatalf("recorded session: config.go = %q", b)
	}
	r.identical(srv, "S1", conf)
}

// A blocking consultation chain (Engineer -> Librarian -> Archivalist), an
// unknown agent, a consultation the Librarian may not make and a loop
// refused re-execute identically without calling the model.
func TestReexecuteConsultationSession(t *testing.T) {
	r, srv, conf := scriptedRig(t, scripted.Consultation, llm.Config{})
	if err := os.WriteFile(filepath.Join(r.dir, "config.go"), []byte("package cfg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if dag := r.wait("S1", r.submit("S1", `nodes: [{id: ask, agent: engineer, prompt: "find the config loader"}]`)); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s", dag.State)
	}
	if cs, err := r.store.Consults(r.ctx, "S1"); err != nil || len(cs) != 2 {
		t.Fatalf("recorded %d consultations (%v), want 2", len(cs), err)
	}
	r.seqOf("S1", func(env *schemas.Envelope) bool {
		p, err := schemas.PayloadAs[schemas.ToolResult](env)
		return env.Type == schemas.TypeToolResult && err == nil && strings.Contains(p.Error, "consultation loop")
	})
	r.identical(srv, "S1", conf)
}

// An Inspector whose small window fills checkpoints and compacts; the
// session re-executes identically without calling the model.
func TestReexecuteCompactionSession(t *testing.T) {
	r, srv, conf := scriptedRig(t, scripted.Memory, llm.Config{MaxContextTokens: 6000, ReserveTokens: 500})
	if err := os.WriteFile(filepath.Join(r.dir, "big.txt"), []byte(strings.Repeat("a line of the file to read\n", 45)), 0o644); err != nil {
		t.Fatal(err)
	}
	if dag := r.wait("S1", r.submit("S1", `nodes: [{id: read, agent: inspector, prompt: "read big.txt until you know it"}]`)); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s", dag.State)
	}
	r.seqOf("S1", func(env *schemas.Envelope) bool { return env.Type == schemas.TypeMemoryCompacted })
	r.identical(srv, "S1", conf)
}

// calcModule makes the rig's work directory the calc module, committed.
func (r *rig) calcModule() {
	r.t.Helper()
	for name, content := range map[string]string{"go.mod": "module example.com/calc\n\ngo 1.22\n", "calc.go": scripted.CalcGo} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", r.dir}, args...)...).CombinedOutput(); err != nil {
			r.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// A TDD pipeline that passes in its second loop (RED checked by a real go
// test run, the Tester's failure sent back to the Engineer) re-executes
// identically without calling the model or running a tool.
func TestReexecuteTDDPipeline(t *testing.T) {
	stages := scripted.NewStages(t)
	stages.TDDInTwoLoops()
	r, srv, conf := scriptedRig(t, stages.Respond, llm.Config{})
	r.calcModule()
	if dag := r.wait("S1", r.submit("S1", `nodes: [{id: add, agent: engineer, prompt: "add Add(a, b int) int to package calc", pipeline: tdd}]`)); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s", dag.State)
	}
	ps, err := r.store.Pipelines(r.ctx, projections.PipelineFilter{Session: "S1"})
	if err != nil || len(ps) != 1 || ps[0].State != projections.PipelineCompleted || ps[0].Loop != 2 {
		t.Fatalf("recorded pipelines %+v, %v: want one completed in loop 2", ps, err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "calc.go"), []byte("left\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.identical(srv, "S1", conf)
	if b, _ := os.ReadFile(filepath.Join(r.dir, "calc.go")); string(b) != "left\n" {
		t.Fatalf("calc.go = %q: a tool ran", b)
	}
}

// A standard pipeline whose Inspector fails it three times asks the user,
// who fails it: the session re-executes identically without calling the
// model.
func TestReexecutePipelineThatAsksTheUser(t *testing.T) {
	stages := scripted.NewStages(t)
	stages.FailingThreeLoops()
	r, srv, conf := scriptedRig(t, stages.Respond, llm.Config{})
	r.calcModule()
	id := r.submit("S1", `nodes: [{id: add, agent: engineer, prompt: "add Add(a, b int) int to package calc", pipeline: standard}]`)
	var pl *projections.Pipeline
	brokertest.Eventually(t, 60*time.Second, "the pipeline asks the user", func() bool {
		ps, err := r.store.Pipelines(r.ctx, projections.PipelineFilter{Session: "S1"})
		if err != nil || len(ps) != 1 {
			return false
		}
		pl = ps[0]
		return pl.State == projections.PipelineAwaitingUser
	})
	r.send("S1", pipeline.Name, schemas.TypeClarificationResponse, schemas.ClarificationResponse{InReplyTo: pl.ID, Answer: "fail"})
	if dag := r.wait("S1", id); dag.State != projections.DAGFailed {
		t.Fatalf("recorded DAG %s", dag.State)
	}
	r.identical(srv, "S1", conf)
}

// Two variants of a step (one asked for while the original's Engineer
// works), both ready, the variant selected and merged into the work
// directory: the session re-executes identically without calling the
// model or running a tool.
func TestReexecuteVariantsOneSelected(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go-on")
	stages := scripted.NewStages(t)
	stages.TwoVariants(gate)
	r, srv, conf := scriptedRig(t, stages.Respond, llm.Config{}, "sh")
	r.dumpOnFailure("S1")
	r.calcModule()
	id := r.submit("S1", `nodes: [{id: add, agent: engineer, prompt: "add Add(a, b int) int to package calc", pipeline: review}]`)
	brokertest.Eventually(t, 30*time.Second, "the pipeline runs", func() bool {
		ps, err := r.store.Pipelines(r.ctx, projections.PipelineFilter{Session: "S1"})
		return err == nil && len(ps) == 1
	})
	r.send("S1", pipeline.Name, schemas.TypeVariantRequest, schemas.VariantRequest{DAGID: id, NodeID: "add", Approach: scripted.Counting})
	var group *projections.VariantGroup
	brokertest.Eventually(t, 30*time.Second, "the variant runs", func() bool {
		gs, err := r.store.VariantGroups(r.ctx, projections.PipelineFilter{Session: "S1"})
		if err != nil || len(gs) != 1 || len(gs[0].Variants) != 2 {
			return false
		}
		group = gs[0]
		return true
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 60*time.Second, "both variants ready", func() bool {
		g, err := r.store.VariantGroup(r.ctx, group.ID)
		return err == nil && g.State == projections.GroupPending
	})
	r.send("S1", pipeline.Name, schemas.TypeVariantSelect, schemas.VariantSelect{GroupID: group.ID, VariantID: "v1"})
	if dag := r.wait("S1", id); dag.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s", dag.State)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "calc.go")); string(b) != scripted.CountingAdd {
		t.Fatalf("recorded session: calc.go = %q, want the variant's", b)
	}
	r.identical(srv, "S1", conf)
}
