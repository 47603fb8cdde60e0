package reexec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig records sessions by running them for real: an embedded broker, Pebble
// projections and every agent, in temporary directories.
type rig struct {
	t     testing.TB
	ctx   context.Context
	log   *events.Log
	store *projections.Store
	dir   string
	cfg   runtime.Config
	js    jetstream.JetStream
	names []string // the agents running
	stop  func()
}

func toolOptions() tools.Options {
	return tools.Options{Kill: tools.KillOptions{SIGINTGrace: 200 * time.Millisecond, SIGTERMGrace: 200 * time.Millisecond}}
}

func newRig(t testing.TB) *rig { return newRigWith(t, nil) }

// newRigWith is newRig with a hook that completes the agents' configuration
// once the store exists (an LLM client needs it).
func newRigWith(t testing.TB, configure func(*runtime.Config, *projections.Store)) *rig {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, log: events.New(b.JetStream()), store: store, dir: t.TempDir(), js: b.JetStream()}
	// Variants' worktrees in the test's directory: their paths are named
	// by groups whose ids are the same in every run of a test.
	r.cfg = runtime.Config{DefaultWorkDir: r.dir, AckWait: 5 * time.Second, Tools: toolOptions(), WorktreeDir: t.TempDir()}
	cfg := r.cfg
	cfg.JetStream, cfg.Store = b.JetStream(), store
	if configure != nil {
		configure(&cfg, store)
	}
	r.names = cfg.Names()
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); store.Projector(r.log).Run(rctx) }()
	go func() {
		defer wg.Done()
		if err := runtime.Run(rctx, cfg); err != nil {
			t.Errorf("runtime: %v", err)
		}
	}()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(func() { r.stop(); store.Close() })
	return r
}

func (r *rig) append(envs ...*schemas.Envelope) {
	r.t.Helper()
	for _, e := range envs {
		if _, err := r.log.Append(r.ctx, e); err != nil {
			r.t.Fatal(err)
		}
	}
}

// submit creates and resumes session, runs the plan in it and returns the
// DAG id.
func (r *rig) submit(session, src string) string {
	r.t.Helper()
	exec := r.execute(session, "dag-"+session, "orchestrator", src)
	r.append(append(r.open(session), exec)...)
	return "dag-" + session
}

// open is the creation of session and its resume.
func (r *rig) open(session string) []*schemas.Envelope {
	create, _ := schemas.New(schemas.TypeSessionCreate, session, "user", "", time.Now(), schemas.SessionCreate{Name: session})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	return []*schemas.Envelope{create, resume}
}

// execute is the dag_execute of the plan src as DAG id, sent to target.
func (r *rig) execute(session, id, target, src string) *schemas.Envelope {
	r.t.Helper()
	p, err := plan.Parse([]byte(src))
	if err != nil {
		r.t.Fatal(err)
	}
	p.DAG.ID = id
	exec, _ := schemas.New(schemas.TypeDAGExecute, session, "user", target, time.Now(), schemas.DAGExecute{DAG: p.DAG, WorkDir: r.dir})
	return exec
}

// wait returns the session's DAG once it is no longer running and the
// agents are done with everything.
func (r *rig) wait(session, dagID string) *projections.DAG {
	r.t.Helper()
	var dag *projections.DAG
	brokertest.Eventually(r.t, 60*time.Second, "DAG "+dagID+" finished", func() bool {
		d, err := r.store.SessionDAG(r.ctx, session, dagID)
		if err != nil {
			return false
		}
		dag = d
		return d.State != projections.DAGRunning
	})
	r.idle()
	return dag
}

// idle waits until every agent has handled every message and the
// projections have folded the whole stream.
func (r *rig) idle() {
	r.t.Helper()
	brokertest.Eventually(r.t, 20*time.Second, "the agents idle", func() bool {
		for _, name := range r.names {
			c, err := r.js.Consumer(r.ctx, broker.Stream, agents.ConsumerName(name))
			if err != nil {
				return false
			}
			info, err := c.Info(r.ctx)
			if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
				return false
			}
		}
		last, err := r.log.LastSeq(r.ctx)
		return err == nil && r.store.Cursor() >= last
	})
}

func (r *rig) reexecute(session string, opts reexec.Options) *reexec.Report {
	r.t.Helper()
	rec, err := reexec.Load(r.ctx, r.store, session, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.run(rec, opts)
}

func (r *rig) run(rec *reexec.Recording, opts reexec.Options) *reexec.Report {
	r.t.Helper()
	if opts.Runtime.DefaultWorkDir == "" {
		opts.Runtime = r.cfg
	}
	opts.Dir = r.t.TempDir()
	rep, err := reexec.Run(r.ctx, rec, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return rep
}

// A tool plan with a node that fails then succeeds on retry, a node that
// fails for good and a dependent skipped for it, and a file written: the
// re-execution produces every event again, the same, from the recording
// alone: no tool runs (the written file stays as it was left).
const toolPlan = `
name: tools
policy: {max_concurrency: 4, retry: {max: 1, backoff: 10ms}}
nodes:
  - {id: flaky, agent: engineer, tool: exec, args: {argv: [sh, -c, "test -f marker || { touch marker; exit 3; }"]}}
  - {id: broken, agent: engineer, tool: exec, args: {argv: ["false"]}, retry: {max: 0}}
  - {id: after, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [broken]}
  - {id: write, agent: engineer, tool: write_file, args: {path: out.txt, content: "recorded\n"}}
  - {id: read, agent: engineer, tool: read_file, args: {path: out.txt}, depends_on: [write, flaky]}
`

func TestReexecuteToolPlanIsIdenticalAndRunsNothing(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", toolPlan)
	dag := r.wait("S1", id)
	if dag.State != projections.DAGFailed || dag.Node("flaky").Attempt != 2 || dag.Node("after").State != projections.NodeSkipped {
		t.Fatalf("recorded DAG %s: flaky %+v, after %s", dag.State, dag.Node("flaky"), dag.Node("after").State)
	}
	out := filepath.Join(r.dir, "out.txt")
	if err := os.WriteFile(out, []byte("left after the recording\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := r.reexecute("S1", reexec.Options{})
	if !rep.Identical || rep.Divergence != nil {
		t.Fatalf("re-execution diverged: %+v", rep.Divergence)
	}
	if rep.CallsMade != 0 || rep.CallsServed != 5 || rep.Events == 0 || rep.Events != rep.Recorded {
		t.Fatalf("report %+v: want 5 calls served (flaky twice, after skipped), none made, every recorded event compared", rep)
	}
	if b, _ := os.ReadFile(out); string(b) != "left after the recording\n" {
		t.Fatalf("out.txt = %q: a tool ran during the re-execution", b)
	}
}

// changePlan loads session's recording with change made to the plan of its
// dag_execute input, and returns it with that input's sequence.
func (r *rig) changePlan(session string, change func(*schemas.DAG)) (*reexec.Recording, uint64) {
	r.t.Helper()
	rec, err := reexec.Load(r.ctx, r.store, session, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, in := range rec.Inputs() {
		if in.Env.Type == schemas.TypeDAGExecute {
			p, _ := schemas.PayloadAs[schemas.DAGExecute](in.Env)
			change(&p.DAG)
			if err := in.Env.SetPayload(p); err != nil {
				r.t.Fatal(err)
			}
			return rec, in.Seq
		}
	}
	r.t.Fatalf("session %s has no dag_execute input", session)
	return nil, 0
}

// Changing one thing in the inputs (the command of one node of the plan) is
// reported at the first event that follows from it, with the field that
// differs and the input it follows from.
func TestReexecuteReportsWhereAChangedPlanDiverges(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: two
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [a]}
`)
	r.wait("S1", id)
	rec, execSeq := r.changePlan("S1", func(dag *schemas.DAG) { dag.Nodes[1].Args = map[string]any{"argv": []any{"false"}} })
	rep := r.run(rec, reexec.Options{Idle: 300 * time.Millisecond})
	d := rep.Divergence
	if rep.Identical || d == nil {
		t.Fatalf("no divergence reported: %+v", rep)
	}
	if d.Kind != "differs" || d.Recorded == nil || d.Recorded.Type != schemas.TypeTaskDispatch || d.New == nil || d.New.Payload["node_id"] != "b" {
		t.Fatalf("divergence %s: recorded %+v, new %+v; want the dispatch of b", d.Kind, d.Recorded, d.New)
	}
	if len(d.Fields) != 1 || d.Fields[0].Path != "payload.args.argv[0]" || d.Fields[0].Recorded != "true" || d.Fields[0].New != "false" {
		t.Fatalf("fields %+v, want payload.args.argv[0]: true -> false", d.Fields)
	}
	if d.Input == nil || d.Input.Seq != execSeq || d.Input.Type != schemas.TypeDAGExecute {
		t.Fatalf("divergence follows input %+v, want the dag_execute at seq %d", d.Input, execSeq)
	}
}

// A session with nothing from outside the agents has nothing to feed a
// re-execution: refused, with the reason.
func TestReexecuteRefusesASessionWithNoInputs(t *testing.T) {
	r := newRig(t)
	n, _ := schemas.New(schemas.TypeNotice, "S9", "orchestrator", "user", time.Now(), schemas.Notice{Level: schemas.NoticeInfo, Text: "from an agent"})
	r.append(n)
	r.idle()
	if _, err := reexec.Load(r.ctx, r.store, "S9", 0); !errors.Is(err, reexec.ErrNoInputs) {
		t.Fatalf("Load of a session of agents' events only: %v, want %v", err, reexec.ErrNoInputs)
	}
}

// A session whose DAG still runs is re-executed as far as it is recorded,
// and the report says so.
func TestReexecuteASessionStillRunning(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: slow
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: [sleep, "60"]}, depends_on: [a]}
`)
	brokertest.Eventually(t, 30*time.Second, "node b running", func() bool {
		d, err := r.store.SessionDAG(r.ctx, "S1", id)
		return err == nil && d.Node("b").State == projections.NodeRunning
	})
	rep := r.reexecute("S1", reexec.Options{Idle: 300 * time.Millisecond})
	if !rep.Running || !rep.Identical || rep.CallsMade != 0 || rep.Events == 0 {
		t.Fatalf("report %+v, %+v: want what is recorded so far re-executed, identical, and said to be running", rep, rep.Divergence)
	}
	// b's call was in flight when the recording was read: if the new run
	// asked for its result before the report (it may not have yet), it is
	// pending, never a call the recording lacks.
	if len(rep.CallsMissing) != 0 || len(rep.CallsPending) > 1 || len(rep.CallsPending) == 1 && !strings.HasPrefix(rep.CallsPending[0], "tool call ") {
		t.Fatalf("calls pending %q, missing %q: want at most b's call pending and none missing", rep.CallsPending, rep.CallsMissing)
	}
}

// A Runtime executes its recording once: its stream holds the first run's
// events, so a second run would be compared against them.
func TestRuntimeExecutesOnce(t *testing.T) {
	r := newRig(t)
	r.wait("S1", r.submit("S1", `
name: once
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
`))
	rec, err := reexec.Load(r.ctx, r.store, "S1", 0)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := reexec.Start(r.ctx, rec, reexec.Options{Runtime: r.cfg, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rep, err := rt.Execute(r.ctx); err != nil || !rep.Identical {
		t.Fatalf("first Execute: %+v, %v; want identical", rep, err)
	}
	if rep, err := rt.Execute(r.ctx); !errors.Is(err, reexec.ErrExecuted) {
		t.Fatalf("second Execute: %+v, %v; want %v", rep, err, reexec.ErrExecuted)
	}
}

// A changed max_concurrency changes when nodes are dispatched, not what any
// event says: it is reported at the first dispatch that one run made with more
// nodes in flight than the other run's limit allows. Lowered, the recording
// is what the new limit forbids (also below a default the recording does not
// name); raised, the new run is what the recorded one forbade. Which dispatch
// that is depends on how the run interleaved: a result served from the
// recording may finish a before b is dispatched, so the first dispatch beyond
// the limit may be c's. What is fixed is that it is beyond the limit, that the
// other run had it within its own, and (for the recording, whose events the
// test holds) that it is the first one beyond.
func TestReexecuteReportsAChangedMaxConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name          string
		recorded, now int
		was           any  // the recorded limit, as the divergence says it
		newOver       bool // the new run went beyond the recorded limit (else the recording beyond today's)
	}{
		{"lowered", 3, 1, 3, false},
		{"lowered from the default", 0, 1, "default", false},
		{"raised", 1, 3, 1, true},
		{"unchanged", 0, 0, nil, false}, // four in flight at once, as the default allows
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			id := r.submit("S1", fmt.Sprintf(`
name: wide
policy: {max_concurrency: %d}
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: c, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: d, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: e, agent: engineer, tool: exec, args: {argv: ["true"]}}
`, tc.recorded))
			r.wait("S1", id)
			rec, execSeq := r.changePlan("S1", func(dag *schemas.DAG) { dag.Policy.MaxConcurrency = tc.now })
			rep := r.run(rec, reexec.Options{Idle: 300 * time.Millisecond})
			d := rep.Divergence
			if tc.was == nil {
				if !rep.Identical {
					t.Fatalf("re-execution diverged: %+v", d)
				}
				return
			}
			if rep.Identical || d == nil {
				t.Fatalf("no divergence reported: %+v", rep)
			}
			if d.Kind != "schedule" || d.Recorded == nil || d.New == nil || d.Recorded.Type != schemas.TypeTaskDispatch ||
				d.New.Type != schemas.TypeTaskDispatch || d.Recorded.Payload["node_id"] != d.New.Payload["node_id"] {
				t.Fatalf("divergence %s (%s): recorded %+v, new %+v; want at one dispatch of both runs", d.Kind, d.Reason, d.Recorded, d.New)
			}
			if len(d.Fields) != 2 || !reflect.DeepEqual(d.Fields[0], reexec.Field{Path: "max_concurrency", Recorded: tc.was, New: tc.now}) ||
				d.Fields[1].Path != "in_flight" {
				t.Fatalf("fields %+v, want max_concurrency %v -> %d, then in_flight", d.Fields, tc.was, tc.now)
			}
			node := d.New.Payload["node_id"].(string)
			over, within := d.Fields[1].Recorded, d.Fields[1].New
			overLimit, withinLimit := tc.now, projections.DefaultMaxConcurrency
			if tc.recorded > 0 {
				withinLimit = tc.recorded
			}
			if tc.newOver {
				over, within = within, over
				overLimit, withinLimit = tc.recorded, tc.now
			}
			overIn, _ := over.([]string)
			withinIn, _ := within.([]string)
			if len(overIn) <= overLimit || overIn[len(overIn)-1] != node {
				t.Fatalf("in flight with %s's dispatch beyond the limit: %v, want more than %d ending with %s", node, overIn, overLimit, node)
			}
			if len(withinIn) == 0 || len(withinIn) > withinLimit || withinIn[len(withinIn)-1] != node {
				t.Fatalf("in flight with %s's dispatch in the other run: %v, want at most %d ending with %s", node, withinIn, withinLimit, node)
			}
			if first := firstBeyond(rec, overLimit); !tc.newOver && first != node {
				t.Fatalf("divergence at %s's dispatch, but the first dispatch beyond %d was %s's", node, overLimit, first)
			}
			if d.Input == nil || d.Input.Seq != execSeq {
				t.Fatalf("divergence follows input %+v, want the dag_execute at seq %d", d.Input, execSeq)
			}
		})
	}
}

// firstBeyond is the node of the first task_dispatch of rec made with more
// than limit nodes of its (only) DAG in flight.
func firstBeyond(rec *reexec.Recording, limit int) string {
	inFlight := map[string]bool{}
	for _, r := range rec.Events {
		node, _ := reexec.Normalize(r.Seq, r.Env).Payload["node_id"].(string)
		switch r.Env.Type {
		case schemas.TypeTaskDispatch:
			inFlight[node] = true
			if len(inFlight) > limit {
				return node
			}
		case schemas.TypeTaskComplete, schemas.TypeTaskFailed, schemas.TypeNodeRetry:
			delete(inFlight, node)
		}
	}
	return ""
}

// seqOf returns the sequence of the first event of session's history that
// matches.
func (r *rig) seqOf(session string, match func(*schemas.Envelope) bool) uint64 {
	r.t.Helper()
	page, err := r.store.SessionLog(r.ctx, projections.LogQuery{Session: session, Limit: 100000})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range page.Entries {
		if env, err := schemas.Unmarshal(e.Data); err == nil && match(env) {
			return e.Seq
		}
	}
	r.t.Fatalf("no such event in session %s", session)
	return 0
}

func (r *rig) fork(parent, id string, at uint64) {
	r.t.Helper()
	env, _ := schemas.New(schemas.TypeSessionFork, id, "user", "orchestrator", time.Now(), schemas.SessionFork{Parent: parent, ParentSeq: at})
	r.append(env)
}

func (r *rig) verify() {
	r.t.Helper()
	if _, err := r.store.Verify(r.ctx, r.log); err != nil {
		r.t.Fatalf("verify: %v", err)
	}
}

// A fork in the middle of a DAG goes on from the parent's state there: the
// node dispatched at the fork point is dispatched again in the fork, both
// branches run to the end, neither changes the other, and the projections
// verify clean. The fork's history re-executes identically too.
func TestForkMidDAGRunsBothBranchesToTheEnd(t *testing.T) {
	r := newRig(t)
	id := r.submit("S1", `
name: chain
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo a >> log.txt"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo b >> log.txt"]}, depends_on: [a]}
  - {id: c, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo c >> log.txt"]}, depends_on: [b]}
`)
	parent := r.wait("S1", id)
	at := r.seqOf("S1", func(env *schemas.Envelope) bool {
		p, err := schemas.PayloadAs[schemas.TaskDispatch](env)
		return env.Type == schemas.TypeTaskDispatch && err == nil && p.NodeID == "b"
	})
	r.fork("S1", "F1", at)
	fork := r.wait("F1", id)
	if fork.State != projections.DAGSucceeded || fork.Outcome.Succeeded != 3 {
		t.Fatalf("fork's DAG %s: %+v", fork.State, fork.Outcome)
	}
	if b := fork.Node("b"); b.Result == nil || b.Result.Seq <= at || b.Result.Seq == parent.Node("b").Result.Seq {
		t.Fatalf("fork's node b = %+v: want a result of its own, after the fork point %d", b.Result, at)
	}
	again, err := r.store.SessionDAG(r.ctx, "S1", id)
	if err != nil || again.Outcome.Seq != parent.Outcome.Seq || again.Node("c").Result.Seq != parent.Node("c").Result.Seq {
		t.Fatalf("the parent's DAG changed: %+v, %v", again.Outcome, err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "log.txt")); string(b) != "a\nb\nc\nb\nc\n" {
		t.Fatalf("log.txt = %q: want the parent's a, b, c, then the fork's b, c", b)
	}
	r.verify()

	rep := r.reexecute("F1", reexec.Options{})
	if !rep.Identical || rep.CallsMade != 0 {
		t.Fatalf("re-execution of the fork: %+v, divergence %+v", rep, rep.Divergence)
	}
}

// orchestratorHolds waits until the Orchestrator holds a message of a paused
// session: delivered to it, not acked.
func (r *rig) orchestratorHolds() {
	r.t.Helper()
	brokertest.Eventually(r.t, 20*time.Second, "the Orchestrator holding a paused session's message", func() bool {
		c, err := r.js.Consumer(r.ctx, broker.Stream, agents.ConsumerName("orchestrator"))
		if err != nil {
			return false
		}
		info, err := c.Info(r.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending > 0
	})
}

// A session paused before its DAG and resumed later: the DAG waits for the
// resume in the recording and in the re-execution alike.
func TestReexecutePausedAndResumedSession(t *testing.T) {
	r := newRig(t)
	pause, _ := schemas.New(schemas.TypeSignal, "S1", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeSession})
	r.append(append(r.open("S1"), pause)...)
	exec := r.execute("S1", "held", "orchestrator", `
name: held
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [a]}
`)
	seq, err := r.log.Append(r.ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.store.WaitFor(r.ctx, seq); err != nil {
		t.Fatal(err)
	}
	if d, err := r.store.SessionDAG(r.ctx, "S1", "held"); err != nil || d.Node("a").State != projections.NodeReady {
		t.Fatalf("paused session's DAG: %+v, %v; want node a held ready", d, err)
	}
	r.orchestratorHolds()
	goOn, _ := schemas.New(schemas.TypeSignal, "S1", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalResume, Scope: schemas.ScopeSession})
	r.append(goOn)
	if d := r.wait("S1", "held"); d.State != projections.DAGSucceeded {
		t.Fatalf("DAG %s after resume", d.State)
	}
	resumed := r.seqOf("S1", func(env *schemas.Envelope) bool { return env.ID == goOn.ID })
	if first := r.seqOf("S1", func(env *schemas.Envelope) bool { return env.Type == schemas.TypeTaskDispatch }); first < resumed {
		t.Fatalf("dispatched at seq %d, before the resume at %d", first, resumed)
	}
	rep := r.reexecute("S1", reexec.Options{})
	if !rep.Identical || rep.Inputs != 5 || rep.CallsServed != 2 {
		t.Fatalf("re-execution: %+v, divergence %+v", rep, rep.Divergence)
	}
}

// model answers as each agent would, from what it is asked.
func model(req llmtest.Request) llmtest.Reply {
	sys := req.System()
	switch {
	case strings.Contains(sys, "You are the Guide"):
		return llmtest.Text(`{"intent_type": "EXPLICIT", "confidence": 0.9, "reason": "a bounded change",
			"assumptions_explicit": true, "scope_bounded": true, "success_criteria": ["an empty name is an error"]}`)
	case strings.Contains(sys, "You are the Architect"):
		return llmtest.Text(`{"action": "plan", "rationale": "Change the loader.", "confidence": 0.85,
			"plan": {"name": "validation", "nodes": [{"id": "impl", "agent": "engineer", "prompt": "add input validation to config.go"}]}}`)
	case strings.Contains(sys, "You are the Engineer"):
		if req.Messages[len(req.Messages)-1].Role == "user" {
			return llmtest.Tools(llmtest.Call("w1", "write_file", `{"path": "config.go", "content": "package cfg // name is required\n"}`))
		}
		return llmtest.Text("Added validation to config.go.")
	}
	return llmtest.Status(400)
}

// newLLMRig is a rig whose agents use an LLM client configured by conf.
func newLLMRig(t testing.TB, conf llm.Config, engineerCommands ...string) *rig {
	return newRigWith(t, func(cfg *runtime.Config, store *projections.Store) {
		if len(engineerCommands) > 0 {
			cfg.Tools.Permissions = tools.DefaultPolicy().WithCommands("engineer", engineerCommands...)
		}
		c, err := llm.NewClient(conf, llm.Deps{Records: store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cfg.LLM = c
	})
}

// requestAndApprove records session S1: a request in plain words, its plan
// approved by the user when it waits, run to the end. It returns the plan's
// id and the approval.
func (r *rig) requestAndApprove() (string, *schemas.Envelope) {
	r.t.Helper()
	create, _ := schemas.New(schemas.TypeSessionCreate, "S1", "user", "", time.Now(), schemas.SessionCreate{Name: "llm", Config: schemas.SessionConfig{WorkDir: r.dir}})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	input, _ := schemas.New(schemas.TypeUserInput, "S1", "user", "", time.Now(), schemas.UserInput{Text: "add input validation to the config loader"})
	r.append(create, resume, input)
	var planID string
	brokertest.Eventually(r.t, 30*time.Second, "a plan waiting for approval", func() bool {
		ps, err := r.store.Pending(r.ctx, "S1")
		if err != nil || len(ps) == 0 {
			return false
		}
		planID = ps[0].PlanID
		return planID != ""
	})
	approve, _ := schemas.New(schemas.TypePlanApproved, "S1", "user", "", time.Now(), schemas.PlanApproved{PlanID: planID})
	r.append(approve)
	if d := r.wait("S1", planID); d.State != projections.DAGSucceeded {
		r.t.Fatalf("recorded DAG %s", d.State)
	}
	return planID, approve
}

// recordLLM records session S1 through the scripted model (see
// requestAndApprove), returning the model's server and configuration too.
func recordLLM(t *testing.T) (*rig, *llmtest.Server, llm.Config, string, *schemas.Envelope) {
	srv := llmtest.New(t)
	srv.Respond(model)
	conf := llm.Config{BaseURL: srv.URL(), Model: "fake", Timeout: 5 * time.Second}
	r := newLLMRig(t, conf)
	planID, approve := r.requestAndApprove()
	return r, srv, conf, planID, approve
}

// A request in plain words through the scripted model: the Guide classifies
// it, the Architect plans, the user approves, an Engineer prompt node writes a
// file with a tool call. Re-executed against the same server, it makes no
// call (the server's counter does not move) and writes nothing; with another
// model configured, it diverges at the first LLM call, naming the change.
func TestReexecuteLLMSession(t *testing.T) {
	r, srv, conf, planID, approve := recordLLM(t)
	calls := srv.Calls()
	if calls != 4 {
		t.Fatalf("%d LLM calls recorded, want 4 (classify, plan, two engineer steps)", calls)
	}
	out := filepath.Join(r.dir, "config.go")
	if err := os.WriteFile(out, []byte("left\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	rep := r.reexecute("S1", reexec.Options{LLM: &conf})
	// Served: four LLM calls, the tool call and the prompt node's skill
	// selection.
	if !rep.Identical || rep.CallsServed != 6 || rep.CallsMade != 0 {
		t.Fatalf("re-execution: %+v, divergence %+v", rep, rep.Divergence)
	}
	if srv.Calls() != calls {
		t.Fatalf("the re-execution called the model: %d calls, %d before", srv.Calls(), calls)
	}
	if b, _ := os.ReadFile(out); string(b) != "left\n" {
		t.Fatalf("config.go = %q: a tool ran", b)
	}

	other := conf
	other.Model = "fake-2"
	rep = r.reexecute("S1", reexec.Options{LLM: &other, Idle: 300 * time.Millisecond})
	d := rep.Divergence
	if rep.Identical || d == nil || d.Kind != "request" || d.Request.Model == nil || d.Request.Model[0] != "fake" || d.Request.Model[1] != "fake-2" || d.Request.Agent != "guide" {
		t.Fatalf("divergence %+v, want the Guide's first call, model fake -> fake-2", d)
	}
	if d.Input == nil || d.Input.Type != schemas.TypeUserInput {
		t.Fatalf("divergence follows %+v, want the user_input", d.Input)
	}
	if srv.Calls() != calls {
		t.Fatalf("a changed request went out without --live: %d calls, %d before", srv.Calls(), calls)
	}

	// Today's Engineer has another prompt: the divergence is its first
	// call, after the approval, with the system message side by side.
	opts := reexec.Options{LLM: &conf, Runtime: r.cfg, Idle: 300 * time.Millisecond}
	opts.Runtime.Prompts = map[string]string{"engineer": "You are the Engineer. Change nothing."}
	rep = r.reexecute("S1", opts)
	d = rep.Divergence
	if rep.Identical || d == nil || d.Kind != "request" || d.Request.Agent != "engineer" || d.Request.Message == nil {
		t.Fatalf("divergence %+v, want the Engineer's first call", d)
	}
	if m := d.Request.Message; m.Index != 0 || m.Role != "system" || !strings.HasPrefix(m.Recorded, "You are the Engineer of Sylk.") ||
		!strings.HasPrefix(m.New, "You are the Engineer. Change nothing.") {
		t.Fatalf("message change %+v, want the system prompt", m)
	}
	if d.Input == nil || d.Input.ID != approve.ID {
		t.Fatalf("divergence follows %+v, want the approval", d.Input)
	}

	// A fork just before the approval: the plan waits in the fork, is
	// approved there too, and the fork's DAG runs to the end with calls of
	// its own; the parent's stays as it was and both verify clean.
	approved := r.seqOf("S1", func(env *schemas.Envelope) bool { return env.ID == approve.ID })
	r.fork("S1", "F1", approved-1)
	brokertest.Eventually(t, 10*time.Second, "the plan waiting in the fork", func() bool {
		ps, err := r.store.Pending(r.ctx, "F1")
		return err == nil && len(ps) == 1 && ps[0].PlanID == planID
	})
	again, _ := schemas.New(schemas.TypePlanApproved, "F1", "user", "", time.Now(), schemas.PlanApproved{PlanID: planID})
	r.append(again)
	if d := r.wait("F1", planID); d.State != projections.DAGSucceeded {
		t.Fatalf("the fork's DAG %s", d.State)
	}
	if srv.Calls() != calls+2 {
		t.Fatalf("%d calls after the fork ran, want %d: the Engineer's two steps again", srv.Calls(), calls+2)
	}
	if ps, err := r.store.Pending(r.ctx, "S1"); err != nil || len(ps) != 0 {
		t.Fatalf("the parent's pending requests changed: %+v, %v", ps, err)
	}

	// Another fork at the same point answers the plan differently: rejected
	// there, nothing runs in it, and neither the parent nor F1 changes.
	r.fork("S1", "F2", approved-1)
	brokertest.Eventually(t, 10*time.Second, "the plan waiting in the second fork", func() bool {
		ps, err := r.store.Pending(r.ctx, "F2")
		return err == nil && len(ps) == 1 && ps[0].PlanID == planID
	})
	reject, _ := schemas.New(schemas.TypePlanModified, "F2", "user", "", time.Now(), schemas.PlanModified{PlanID: planID, Rejected: true})
	r.append(reject)
	brokertest.Eventually(t, 10*time.Second, "the plan answered in the second fork", func() bool {
		ps, err := r.store.Pending(r.ctx, "F2")
		return err == nil && len(ps) == 0
	})
	r.idle()
	if d, err := r.store.SessionDAG(r.ctx, "F2", planID); !errors.Is(err, projections.ErrNotFound) {
		t.Fatalf("the rejected plan's DAG in F2: %+v, %v; want none", d, err)
	}
	if srv.Calls() != calls+2 {
		t.Fatalf("%d calls after the rejection, want %d: nothing runs in F2", srv.Calls(), calls+2)
	}
	for _, s := range []string{"S1", "F1"} {
		if d, err := r.store.SessionDAG(r.ctx, s, planID); err != nil || d.State != projections.DAGSucceeded {
			t.Fatalf("the DAG of %s after the rejection in F2: %+v, %v", s, d, err)
		}
	}
	r.verify()
}

// changedAnswer reads the store as a recording in which the model answered
// one call otherwise: the LLM response that change alters (it reports
// whether it did) is re-encoded with the new answer, as a run against
// another model would have recorded it.
type changedAnswer struct {
	*projections.Store
	change func(*schemas.LLMResponse) bool
}

func (c changedAnswer) SessionLog(ctx context.Context, q projections.LogQuery) (*projections.LogPage, error) {
	page, err := c.Store.SessionLog(ctx, q)
	if err != nil {
		return nil, err
	}
	for i, e := range page.Entries {
		env, err := schemas.Unmarshal(e.Data)
		if err != nil || env.Type != schemas.TypeLLMResponse {
			continue
		}
		p, err := schemas.PayloadAs[schemas.LLMResponse](env)
		if err != nil || !c.change(p) {
			continue
		}
		if err := env.SetPayload(p); err != nil {
			return nil, err
		}
		if page.Entries[i].Data, err = schemas.Marshal(env); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// A recording in which the model answered one call otherwise (the
// Architect planned a change of loader.go, not config.go) re-executes with
// that answer served: the divergence is the Architect's plan, with the
// node's prompt side by side, after the user's request; no call is made.
func TestReexecuteReportsAChangedModelAnswer(t *testing.T) {
	r, srv, conf, _, _ := recordLLM(t)
	calls := srv.Calls()
	changed := changedAnswer{Store: r.store, change: func(p *schemas.LLMResponse) bool {
		if !strings.Contains(p.Content, `"action": "plan"`) {
			return false
		}
		p.Content = strings.ReplaceAll(p.Content, "config.go", "loader.go")
		return true
	}}
	rec, err := reexec.Load(r.ctx, changed, "S1", 0)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.run(rec, reexec.Options{LLM: &conf, Idle: 300 * time.Millisecond})
	d := rep.Divergence
	if rep.Identical || d == nil || d.Kind != "differs" || d.Recorded == nil || d.Recorded.Type != schemas.TypePlanResponse || d.Recorded.Source != "architect" {
		t.Fatalf("divergence %+v, want the Architect's plan_response", d)
	}
	if len(d.Fields) != 1 || d.Fields[0].Path != "payload.dag.nodes[0].prompt" ||
		d.Fields[0].Recorded != "add input validation to config.go" || d.Fields[0].New != "add input validation to loader.go" {
		t.Fatalf("fields %+v, want the node's prompt, config.go -> loader.go", d.Fields)
	}
	if d.Input == nil || d.Input.Type != schemas.TypeUserInput {
		t.Fatalf("divergence follows %+v, want the user's request", d.Input)
	}
	if srv.Calls() != calls || rep.CallsMade != 0 {
		t.Fatalf("the re-execution called the model: %d calls after the recording's %d", srv.Calls(), calls)
	}
}

// BenchmarkReexecuteSlowLLM records the LLM session (four model calls)
// with every model call taking a second, then re-executes it. It reports
// recorded-s (the recorded run), calls-s (the recorded calls' own time: the
// calls times one second), reexecuted-s (the re-execution, from its first
// input to the verdict), start-s (its scratch runtime's start-up, before
// that) and call-ratio: one call's second over reexecuted-s. Target:
// call-ratio above 1, the whole re-execution shorter than a single recorded
// call, so it waited on none; and the model's server counts no call.
func BenchmarkReexecuteSlowLLM(b *testing.B) {
	const latency = time.Second
	srv := llmtest.New(b)
	srv.Respond(model)
	srv.SetLatency(latency)
	conf := llm.Config{BaseURL: srv.URL(), Model: "fake", Timeout: 5 * time.Second}
	r := newLLMRig(b, conf)
	start := time.Now()
	r.requestAndApprove()
	recorded := time.Since(start)
	calls := srv.Calls()
	rec, err := reexec.Load(r.ctx, r.store, "S1", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var took, startup time.Duration
	for range b.N {
		s := time.Now()
		rt, err := reexec.Start(r.ctx, rec, reexec.Options{LLM: &conf, Runtime: r.cfg, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		startup += time.Since(s)
		s = time.Now()
		rep, err := rt.Execute(r.ctx)
		took += time.Since(s)
		rt.Close()
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Identical || rep.CallsMade != 0 || srv.Calls() != calls {
			b.Fatalf("re-execution: %+v, %d calls made, the server counted %d calls after the recording's %d", rep.Divergence, rep.CallsMade, srv.Calls(), calls)
		}
	}
	per := took / time.Duration(b.N)
	b.ReportMetric(recorded.Seconds(), "recorded-s")
	b.ReportMetric(float64(calls)*latency.Seconds(), "calls-s")
	b.ReportMetric(per.Seconds(), "reexecuted-s")
	b.ReportMetric((startup / time.Duration(b.N)).Seconds(), "start-s")
	b.ReportMetric(latency.Seconds()/per.Seconds(), "call-ratio")
	b.ReportMetric(float64(calls), "llm-calls")
}

// A prompt node whose three tool calls in a row fail stops with a task_help
// (the 3-strike rule), and its DAG fails: the session re-executes
// identically, with the model never called and no tool run.
func TestReexecuteThreeStrikeTaskHelp(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(
		llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["sh", "-c", "echo ran >> runs.txt; exit 1"]}`)),
		llmtest.Tools(llmtest.Call("c2", "exec", `{"argv": ["sh", "-c", "echo ran >> runs.txt; exit 2"]}`)),
		llmtest.Tools(llmtest.Call("c3", "exec", `not json`)),
	)
	// sh is on the engineer's command list: it runs without asking.
	r := newLLMRig(t, llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Timeout: 5 * time.Second}, "sh")
	id := r.submit("S1", "name: stuck\nnodes:\n  - {id: fix, agent: engineer, prompt: make the build pass, retry: {max: 0}}\n")
	if dag := r.wait("S1", id); dag.State != projections.DAGFailed {
		t.Fatalf("recorded DAG %s: %+v", dag.State, dag.Node("fix"))
	}
	r.seqOf("S1", func(env *schemas.Envelope) bool { return env.Type == schemas.TypeTaskHelp })
	calls := srv.Calls()
	runs := filepath.Join(r.dir, "runs.txt")
	if b, _ := os.ReadFile(runs); string(b) != "ran\nran\n" || calls != 3 {
		t.Fatalf("recording: %d model calls, runs.txt %q; want 3 calls and two runs", calls, b)
	}

	rep := r.reexecute("S1", reexec.Options{})
	if !rep.Identical || rep.CallsMade != 0 || rep.Events != rep.Recorded {
		t.Fatalf("re-execution: %+v, divergence %+v", rep, rep.Divergence)
	}
	// Served: three model calls, the two tool runs (the third call's
	// arguments never reached a tool) and the skill selection.
	if rep.CallsServed != 6 || srv.Calls() != calls {
		t.Fatalf("%d calls served, model called %d times after the recording's %d", rep.CallsServed, srv.Calls(), calls)
	}
	if b, _ := os.ReadFile(runs); string(b) != "ran\nran\n" {
		t.Fatalf("runs.txt = %q: a tool ran during the re-execution", b)
	}
}

// Today's routing table sends a type elsewhere: the divergence is the
// Guide's routed copy, with its target changed.
func TestReexecuteReportsAChangedRoute(t *testing.T) {
	r := newRig(t)
	exec := r.execute("S1", "routed", "", "name: one\nnodes:\n  - {id: a, agent: engineer, tool: exec, args: {argv: [\"true\"]}}\n")
	r.append(append(r.open("S1"), exec)...)
	if d := r.wait("S1", "routed"); d.State != projections.DAGSucceeded {
		t.Fatalf("recorded DAG %s", d.State)
	}
	routed := r.seqOf("S1", func(env *schemas.Envelope) bool {
		return env.Type == schemas.TypeDAGExecute && env.Metadata[agents.MetaRoutedBy] != ""
	})
	opts := reexec.Options{Runtime: r.cfg, Idle: 300 * time.Millisecond}
	opts.Runtime.Routes = map[schemas.Type]string{schemas.TypeDAGExecute: "architect"}
	rep := r.reexecute("S1", opts)
	d := rep.Divergence
	if rep.Identical || d == nil || d.Kind != "differs" || d.Recorded == nil || d.Recorded.Seq != routed {
		t.Fatalf("divergence %+v, want the routed dag_execute at seq %d", d, routed)
	}
	if len(d.Fields) != 1 || d.Fields[0].Path != "target" || d.Fields[0].Recorded != "orchestrator" || d.Fields[0].New != "architect" {
		t.Fatalf("fields %+v, want target: orchestrator -> architect", d.Fields)
	}
	if d.Input == nil || d.Input.ID != exec.ID {
		t.Fatalf("divergence follows %+v, want the unaddressed dag_execute", d.Input)
	}
}

// Signals to every session (scope all, in the system session) are inputs
// too, fed at their recorded positions: a pause in force before the session
// began holds its DAG, a cancel ends it unrun, a resume lets the held
// dispatch go. Without them the re-execution would run the DAG.
func TestReexecuteFeedsGlobalSignals(t *testing.T) {
	r := newRig(t)
	global := func(action string) *schemas.Envelope {
		env, _ := schemas.New(schemas.TypeSignal, schemas.SystemSession, "user", "orchestrator", time.Now(), schemas.Signal{Action: action, Scope: schemas.ScopeAll})
		return env
	}
	exec := r.execute("S1", "held", "orchestrator", "name: held\nnodes:\n  - {id: a, agent: engineer, tool: exec, args: {argv: [sh, -c, \"echo ran >> runs.txt\"]}}\n")
	r.append(append(append([]*schemas.Envelope{global(schemas.SignalPause)}, r.open("S1")...), exec)...)
	r.orchestratorHolds()
	r.append(global(schemas.SignalCancel))
	brokertest.Eventually(t, 20*time.Second, "the DAG cancelled", func() bool {
		d, err := r.store.SessionDAG(r.ctx, "S1", "held")
		return err == nil && d.State != projections.DAGRunning
	})
	r.append(global(schemas.SignalResume))
	if d := r.wait("S1", "held"); d.State != projections.DAGCancelled {
		t.Fatalf("recorded DAG %s", d.State)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "runs.txt")); !os.IsNotExist(err) {
		t.Fatalf("the cancelled node ran: %v", err)
	}

	rep := r.reexecute("S1", reexec.Options{})
	if !rep.Identical || rep.Inputs != 6 || rep.CallsServed != 0 || len(rep.CallsMissing) != 0 {
		t.Fatalf("re-execution: %+v, divergence %+v; want 6 inputs (three global signals) and no call", rep, rep.Divergence)
	}
}

// With Live, a run that diverged goes on for real and is kept as a fork of
// the session: its history is the recording's up to the Engineer's dispatch,
// then the what-if's own events (the changed prompt's calls, the node's and
// the DAG's outcome), and no agent of the real runtime handles them again.
func TestLiveReexecutionIsKeptAsAFork(t *testing.T) {
	r, srv, conf, planID, _ := recordLLM(t)
	parent, err := r.store.SessionDAG(r.ctx, "S1", planID)
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls()
	dispatch := r.seqOf("S1", func(env *schemas.Envelope) bool { return env.Type == schemas.TypeTaskDispatch })

	opts := reexec.Options{LLM: &conf, Runtime: r.cfg, Live: true, Keep: r.log, KeepAs: "W1", Idle: 300 * time.Millisecond}
	opts.Runtime.Prompts = map[string]string{"engineer": "You are the Engineer. Change nothing."}
	rep := r.reexecute("S1", opts)
	w := rep.WhatIf
	if rep.Identical || rep.Divergence.Kind != "request" || w == nil || w.Session != "W1" || w.Parent != "S1" || w.ParentSeq != dispatch {
		t.Fatalf("report %+v, what-if %+v: want a fork W1 of S1 at the Engineer's dispatch (seq %d)", rep, w, dispatch)
	}
	if srv.Calls() != calls+2 || rep.CallsMade != 2 {
		t.Fatalf("%d model calls after the recording's %d, %d made: want the Engineer's two, live", srv.Calls(), calls, rep.CallsMade)
	}
	r.idle()
	s, err := r.store.Session(r.ctx, "W1")
	if err != nil || s.Fork == nil || s.Fork.Parent != "S1" || s.Fork.ParentSeq != dispatch {
		t.Fatalf("session W1: %+v, %v", s, err)
	}
	dag, err := r.store.SessionDAG(r.ctx, "W1", planID)
	if err != nil || dag.State != projections.DAGSucceeded || dag.Node("impl").Result == nil || dag.Node("impl").Result.Seq <= dispatch {
		t.Fatalf("the what-if's DAG: %+v, %v", dag, err)
	}
	page, err := r.store.SessionLog(r.ctx, projections.LogQuery{Session: "W1", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	own, asked := 0, false
	for _, e := range page.Entries {
		if e.From != "" {
			continue
		}
		own++
		env, err := schemas.Unmarshal(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		if env.Type != schemas.TypeSessionFork && env.Metadata[agents.MetaWhatIf] != "S1" {
			t.Fatalf("seq %d %s in W1 is not marked as the what-if's: handled by today's agents?", e.Seq, env.Type)
		}
		if p, err := schemas.PayloadAs[schemas.LLMRequest](env); err == nil && env.Type == schemas.TypeLLMRequest {
			asked = asked || strings.HasPrefix(p.Messages[0].Content, "You are the Engineer. Change nothing.")
		}
	}
	if own != 1+w.Events || !asked {
		t.Fatalf("W1 has %d events of its own, want the fork and the %d of the what-if, with the changed prompt's request (%v)", own, w.Events, asked)
	}
	if srv.Calls() != calls+2 {
		t.Fatalf("the what-if's events were handled again: %d model calls", srv.Calls())
	}
	again, err := r.store.SessionDAG(r.ctx, "S1", planID)
	if err != nil || again.Outcome.Seq != parent.Outcome.Seq {
		t.Fatalf("the parent's DAG changed: %+v, %v", again.Outcome, err)
	}
	r.verify()
}
