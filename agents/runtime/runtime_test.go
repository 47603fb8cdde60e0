package runtime

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/broker"

	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a whole runtime: a real embedded broker, a real Pebble store with its
// projector, and every agent, in a temporary directory.
type rig struct {
	t     *testing.T
	ctx   context.Context
	log   *events.Log
	store *projections.Store
	dir   string
	js    jetstream.JetStream

	run context.Context // the runtime's and the projector's
	wg  sync.WaitGroup
}

func newRig(t *testing.T, opts ...func(*Config)) *rig {
	t.Helper()
	r := newRigHeld(t, opts...)
	r.startProjector()
	return r
}

// newRigHeld is a rig whose projector has not started yet: the agents run
// on projections that lag behind the stream until startProjector.
func newRigHeld(t *testing.T, opts ...func(*Config)) *rig {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, log: events.New(b.JetStream()), store: store, dir: t.TempDir(), js: b.JetStream()}
	cfg := Config{JetStream: b.JetStream(), Store: store, DefaultWorkDir: r.dir, AckWait: 5 * time.Second,
		Tools: tools.Options{Kill: tools.KillOptions{SIGINTGrace: 200 * time.Millisecond, SIGTERMGrace: 200 * time.Millisecond}}}
	for _, o := range opts {
		o(&cfg)
	}
	rctx, cancel := context.WithCancel(ctx)
	r.run = rctx
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := Run(rctx, cfg); err != nil {
			t.Errorf("runtime: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		r.wg.Wait()
		store.Close()
	})
	return r
}

func (r *rig) startProjector() {
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.store.Projector(r.log).Run(r.run) }()
}

func (r *rig) append(envs ...*schemas.Envelope) {
	r.t.Helper()
	if _, err := r.log.AppendBatch(r.ctx, envs); err != nil {
		r.t.Fatal(err)
	}
}

// submit starts session and runs the plan in it; opts change its dag_execute.
func (r *rig) submit(session, src string, opts ...func(*schemas.Envelope)) string {
	r.t.Helper()
	p, err := plan.Parse([]byte(src))
	if err != nil {
		r.t.Fatal(err)
	}
	p.DAG.ID = "dag-" + session
	create, _ := schemas.New(schemas.TypeSessionCreate, session, "user", "", time.Now(), schemas.SessionCreate{Name: session})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	exec, _ := schemas.New(schemas.TypeDAGExecute, session, "user", "orchestrator", time.Now(), schemas.DAGExecute{DAG: p.DAG, WorkDir: r.dir})
	for _, o := range opts {
		o(exec)
	}
	r.append(create, resume, exec)
	return p.DAG.ID
}

// wait returns the DAG once it is no longer running.
func (r *rig) wait(dagID string) *projections.DAG {
	r.t.Helper()
	var dag *projections.DAG
	brokertest.Eventually(r.t, 60*time.Second, "DAG "+dagID+" finished", func() bool {
		d, err := r.store.DAG(r.ctx, dagID)
		if err != nil {
			return false
		}
		dag = d
		return d.State != projections.DAGRunning
	})
	return dag
}

func (r *rig) events(f events.Filter) []*schemas.Envelope {
	r.t.Helper()
	evs, err := r.log.Read(r.ctx, f.Subject(), events.Cursor{}, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []*schemas.Envelope
	for _, e := range evs {
		out = append(out, e.Env)
	}
	return out
}

func nodeStates(d *projections.DAG) map[string]projections.NodeState {
	out := map[string]projections.NodeState{}
	for _, n := range d.Nodes {
		out[n.ID] = n.State
	}
	return out
}

func TestDAGRunsToCompletionWithCheckpointsAndHistory(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: two-layers
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo a >> out.txt"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo b >> out.txt"]}}
  - {id: c, agent: engineer, tool: read_file, args: {path: out.txt}, depends_on: [a, b]}
`)
	dag := r.wait(id)
	if dag.State != projections.DAGSucceeded || dag.Outcome.Succeeded != 3 {
		t.Fatalf("DAG %s: %+v", dag.State, dag.Outcome)
	}
	cps, err := r.store.Checkpoints(r.ctx, "S1", id)
	if err != nil || len(cps) != 2 || cps[0].Layer != 0 || cps[1].Layer != 1 {
		t.Fatalf("checkpoints = %+v, %v", cps, err)
	}
	if c := dag.Node("c"); c.Result == nil || !strings.Contains(c.Result.Summary, "read") {
		t.Fatalf("node c result = %+v", c.Result)
	}
	brokertest.Eventually(t, 10*time.Second, "the Archivalist recorded the outcome", func() bool {
		return len(r.events(events.Filter{Session: "S1", Type: schemas.TypeHistoryEntry})) == 1
	})
}

func TestFailedNodeIsRetriedWithBackoff(t *testing.T) {
	r := newRig(t)
	// Fails the first time (no marker yet), succeeds the second.
	id := r.submit("S1", `
name: flaky
policy: {retry: {max: 2, backoff: 50ms}}
nodes:
  - {id: flaky, agent: engineer, tool: exec, args: {argv: [sh, -c, "test -f marker || { touch marker; exit 3; }"]}}
`)
	dag := r.wait(id)
	if dag.State != projections.DAGSucceeded || dag.Node("flaky").Attempt != 2 {
		t.Fatalf("DAG %s, node %+v", dag.State, dag.Node("flaky"))
	}
	retries := r.events(events.Filter{Type: schemas.TypeNodeRetry})
	if len(retries) != 1 {
		t.Fatalf("%d node_retry events, want 1", len(retries))
	}
	p, _ := schemas.PayloadAs[schemas.NodeRetry](retries[0])
	if p.Attempt != 2 || p.NotBefore.Sub(retries[0].Timestamp) < 50*time.Millisecond {
		t.Fatalf("retry = %+v at %s", p, retries[0].Timestamp)
	}
}

func TestFailureSkipsDependentsAndOtherBranchesGoOn(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: branches
nodes:
  - {id: broken, agent: engineer, tool: exec, args: {argv: ["false"]}}
  - {id: after, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [broken]}
  - {id: later, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [after]}
  - {id: other, agent: engineer, tool: exec, args: {argv: ["true"]}}
`)
	dag := r.wait(id)
	want := map[string]projections.NodeState{"broken": projections.NodeFailed, "after": projections.NodeSkipped, "later": projections.NodeSkipped, "other": projections.NodeSucceeded}
	if got := nodeStates(dag); !equalStates(got, want) || dag.State != projections.DAGFailed {
		t.Fatalf("DAG %s, nodes %v, want %v", dag.State, got, want)
	}
	if dag.Outcome.Failed != 1 || dag.Outcome.Skipped != 2 || dag.Outcome.Succeeded != 1 {
		t.Fatalf("outcome %+v", dag.Outcome)
	}
}

func TestFailFastSkipsEverythingNotStarted(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: failfast
policy: {fail_fast: true, max_concurrency: 1}
nodes:
  - {id: broken, agent: engineer, tool: exec, args: {argv: ["false"]}}
  - {id: independent, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: after, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [independent]}
`)
	dag := r.wait(id)
	want := map[string]projections.NodeState{"broken": projections.NodeFailed, "independent": projections.NodeSkipped, "after": projections.NodeSkipped}
	if got := nodeStates(dag); !equalStates(got, want) {
		t.Fatalf("nodes %v, want %v", got, want)
	}
}

func equalStates(a, b map[string]projections.NodeState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestInvalidDAGIsRejectedWithEveryProblem(t *testing.T) {
	r := newRig(t)
	dag := schemas.DAG{ID: "bad", Nodes: []schemas.Node{
		{ID: "a", Agent: "engineer", Tool: "teleport", DependsOn: []string{"b"}},
		{ID: "b", Agent: "engineer", Tool: "exec", DependsOn: []string{"a"}},
	}}
	exec, _ := schemas.New(schemas.TypeDAGExecute, "S1", "outsider", "orchestrator", time.Now(), schemas.DAGExecute{DAG: dag})
	r.append(exec)
	var rej []*schemas.Envelope
	brokertest.Eventually(t, 10*time.Second, "dag_rejected appended", func() bool {
		rej = r.events(events.Filter{Type: schemas.TypeDAGRejected})
		return len(rej) > 0
	})
	p, _ := schemas.PayloadAs[schemas.DAGRejected](rej[0])
	all := strings.Join(p.Problems, "\n")
	if !strings.Contains(all, `unknown tool "teleport"`) || !strings.Contains(all, "cycle") {
		t.Fatalf("problems = %v", p.Problems)
	}
	if n := len(r.events(events.Filter{Type: schemas.TypeTaskDispatch})); n != 0 {
		t.Fatalf("%d dispatches for a rejected DAG", n)
	}
}

func TestPausedSessionWaitsThenRuns(t *testing.T) {
	r := newRig(t)
	pause, _ := schemas.New(schemas.TypeSignal, "S1", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeSession})
	r.append(pause)
	id := r.submit("S1", `
name: held
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
`)
	// Held: the Orchestrator has the submission, unacked, and does nothing
	// with it.
	brokertest.Eventually(t, 10*time.Second, "submission held by the orchestrator", func() bool {
		c, err := r.js.Consumer(r.ctx, broker.Stream, agents.ConsumerName("orchestrator"))
		if err != nil {
			return false
		}
		info, err := c.Info(r.ctx)
		return err == nil && info.NumAckPending == 1 && info.NumPending == 0
	})
	if n := len(r.events(events.Filter{Type: schemas.TypeTaskDispatch})); n != 0 {
		t.Fatalf("a paused session dispatched %d tasks", n)
	}
	resume, _ := schemas.New(schemas.TypeSignal, "S1", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalResume, Scope: schemas.ScopeSession})
	r.append(resume)
	if dag := r.wait(id); dag.State != projections.DAGSucceeded {
		t.Fatalf("after resume: %s", dag.State)
	}
}

func TestCancelStopsTheRunningToolAndEndsTheWorkflow(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: long
nodes:
  - {id: sleeper, agent: engineer, tool: exec, args: {argv: [sleep, "60"]}}
  - {id: after, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [sleeper]}
`)
	brokertest.Eventually(t, 10*time.Second, "the tool started", func() bool {
		return len(r.events(events.Filter{Type: schemas.TypeToolCall})) == 1
	})
	start := time.Now()
	cancel, _ := schemas.New(schemas.TypeSignal, "S1", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalCancel, Scope: schemas.ScopeSession, Reason: "changed my mind"})
	r.append(cancel)
	dag := r.wait(id)
	if dag.State != projections.DAGCancelled {
		t.Fatalf("DAG %s after cancel", dag.State)
	}
	brokertest.Eventually(t, 10*time.Second, "the cancelled tool's result recorded", func() bool {
		res := r.events(events.Filter{Type: schemas.TypeToolResult})
		if len(res) != 1 {
			return false
		}
		p, _ := schemas.PayloadAs[schemas.ToolResult](res[0])
		return p.Canceled && !p.OK
	})
	if time.Since(start) > 10*time.Second {
		t.Fatalf("cancel took %s", time.Since(start))
	}
	if n := len(r.events(events.Filter{Type: schemas.TypeDeadLetter})); n != 0 {
		t.Fatalf("%d dead letters after a cancel; a cancelled task is not one", n)
	}
}

func TestGuideWithoutLLM(t *testing.T) {
	r := newRig(t)
	r.submit("S1", "nodes: [{id: a, agent: engineer, tool: exec, args: {argv: [\"true\"]}}]")
	r.wait("dag-S1")
	for _, text := range []string{"/help", "/status", "add input validation please", "/nope"} {
		in, _ := schemas.New(schemas.TypeUserInput, "S1", "user", "", time.Now(), schemas.UserInput{Text: text})
		r.append(in)
	}
	var notices []*schemas.Notice
	brokertest.Eventually(t, 10*time.Second, "four notices", func() bool {
		notices = nil
		for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeNotice}) {
			p, _ := schemas.PayloadAs[schemas.Notice](e)
			notices = append(notices, p)
		}
		return len(notices) == 4
	})
	// The Guide handles the four inputs concurrently: the notices may come in
	// any order, one for each.
	text := func(i int) string { return notices[i].Text + " | " + notices[i].Hint }
	for _, want := range [][]string{{"/session"}, {"session S1", "succeeded"}, {"needs an LLM", "--llm-base-url"}, {"unknown command /nope"}} {
		found := slices.ContainsFunc(notices, func(n *schemas.Notice) bool {
			for _, w := range want {
				if !strings.Contains(n.Text+" | "+n.Hint, w) {
					return false
				}
			}
			return true
		})
		if !found {
			for i := range notices {
				t.Log(text(i))
			}
			t.Fatalf("no notice says %q", want)
		}
	}
}

// The user answers a question as soon as it is in the stream, before the
// projector has folded it: the Guide, handed the answer first, still routes it
// to the agent that asked, rather than finding nobody waiting for it.
func TestGuideRoutesAnAnswerAheadOfTheProjections(t *testing.T) {
	r := newRigHeld(t, func(c *Config) { c.Agents = []string{guide.Name} })
	q, _ := schemas.New(schemas.TypeClarificationRequest, "S1", "architect", "user", time.Now(), schemas.ClarificationRequest{Question: "Better how?", Asker: "architect"})
	a, _ := q.Derive(schemas.TypeClarificationResponse, "user", "", time.Now(), schemas.ClarificationResponse{Answer: "safer", InReplyTo: q.ID})
	seqs, err := r.log.AppendBatch(r.ctx, []*schemas.Envelope{q, a})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 30*time.Second, "the Guide holding the answer", func() bool {
		c, err := r.js.Consumer(r.ctx, broker.Stream, agents.ConsumerName(guide.Name))
		if err != nil {
			return false
		}
		info, err := c.Info(r.ctx)
		return err == nil && info.Delivered.Stream >= seqs[1]
	})
	r.startProjector()
	var out *schemas.Envelope
	brokertest.Eventually(t, 30*time.Second, "the Guide's answer to it", func() bool {
		for _, e := range r.events(events.Filter{Session: "S1", Source: "user"}) {
			if e.Metadata[agents.MetaRoutedBy] == guide.Name {
				out = e
			}
		}
		for _, e := range r.events(events.Filter{Session: "S1", Source: guide.Name}) {
			out = e
		}
		return out != nil
	})
	if out.Type != schemas.TypeClarificationResponse || out.Target != "architect" || out.ParentID != a.ID {
		p, _ := schemas.DecodePayload(out)
		t.Fatalf("the Guide appended %s to %s (%+v), want the answer routed to the architect", out.Type, out.Target, p)
	}
}

func TestRerouteLimitAsksTheUser(t *testing.T) {
	r := newRig(t)
	req, _ := schemas.New(schemas.TypeContextRequest, "S1", "architect", "librarian", time.Now(), schemas.ContextRequest{Query: "where is the auth code?"})
	r.append(req)
	prev := req
	hops := []struct{ from, to string }{{"librarian", "academic"}, {"academic", "archivalist"}, {"archivalist", "librarian"}}
	for i, h := range hops {
		rr, _ := prev.Derive(schemas.TypeRerouteRequest, h.from, "", time.Now(), schemas.RerouteRequest{Reason: "not mine", SuggestedTarget: h.to})
		r.append(rr)
		want := i + 1
		brokertest.Eventually(t, 10*time.Second, "rerouted", func() bool {
			return len(r.events(events.Filter{Type: schemas.TypeContextRequest})) == 1+want || len(r.events(events.Filter{Type: schemas.TypeClarificationRequest})) == 1
		})
		routed := r.events(events.Filter{Type: schemas.TypeContextRequest})
		prev = routed[len(routed)-1]
	}
	if n := len(r.events(events.Filter{Type: schemas.TypeContextRequest})); n != 3 {
		t.Fatalf("%d context requests: the third reroute must not be routed", n)
	}
	asks := r.events(events.Filter{Type: schemas.TypeClarificationRequest})
	if len(asks) != 1 || asks[0].Target != "user" || len(asks[0].RerouteHistory) != 3 {
		t.Fatalf("clarifications = %+v", asks)
	}
	q, _ := schemas.PayloadAs[schemas.ClarificationRequest](asks[0])
	if !strings.Contains(q.Question, "archivalist -> librarian: not mine") || !strings.Contains(q.Context, "where is the auth code?") {
		t.Fatalf("question = %q context %q", q.Question, q.Context)
	}
}

// TestAgentNamesAreTheAgentsRunStarts keeps the list `sylk serve --agents`
// checks against equal to the agents Run starts, and Config.Agents choosing
// among them.
func TestAgentNamesAreTheAgentsRunStarts(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	cfg := Config{JetStream: b.JetStream()}
	if got := cfg.Names(); !slices.Equal(got, AgentNames()) {
		t.Fatalf("Run starts %v, AgentNames says %v", got, AgentNames())
	}
	cfg.Agents = []string{"tester", "engineer"}
	if got := cfg.Names(); !slices.Equal(got, []string{"engineer", "tester"}) {
		t.Fatalf("with Agents engineer and tester, Run starts %v", got)
	}
}
