package projections_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// gen builds random event sequences that mostly follow the rules (so DAGs get
// deep into their progress) and sometimes break them (so rejections are
// exercised too). Its model mirrors what the projections will decide.
type gen struct {
	t        *rapid.T
	sessions []string
	state    map[string]projections.SessionState
	dags     []*gdag
	envs     []*schemas.Envelope
	corrs    []string // open clarifications: session/correlation
	calls    []string
}

type gdag struct {
	session, id string
	nodes       []*gnode
	layers      int
	finished    bool
	checkpoint  int
}

type gnode struct {
	id      string
	deps    []int
	state   projections.NodeState
	attempt int
	call    string
}

func (g *gen) add(session string, t schemas.Type, source string, p any) {
	env, err := schemas.New(t, session, source, "", base.Add(time.Duration(len(g.envs))*time.Second), p)
	if err != nil {
		g.t.Fatalf("build %s: %v", t, err)
	}
	g.envs = append(g.envs, env)
}

func (g *gen) session() string {
	return rapid.SampledFrom(g.sessions).Draw(g.t, "session")
}

func (g *gen) step() {
	legal := rapid.IntRange(0, 9).Draw(g.t, "legal") > 0
	switch k := rapid.IntRange(0, 11).Draw(g.t, "kind"); {
	case k == 0 || len(g.sessions) == 0:
		id := fmt.Sprintf("s%d", len(g.sessions))
		if len(g.sessions) > 0 && !legal {
			id = g.session() // a duplicate
		} else {
			g.sessions = append(g.sessions, id)
			g.state[id] = projections.StateCreated
		}
		g.add(id, schemas.TypeSessionCreate, "user", schemas.SessionCreate{Name: "n-" + id})
	case k <= 2:
		s := g.session()
		moves := projections.Allowed(g.state[s])
		all := []projections.Move{projections.MoveResume, projections.MoveSwitch, projections.MoveSuspend, projections.MoveComplete, projections.MoveFail}
		if len(moves) == 0 || !legal {
			moves = all
		}
		m := rapid.SampledFrom(moves).Draw(g.t, "move")
		var from string
		if m == projections.MoveSwitch {
			from = g.session()
		}
		if to, err := projections.Next(s, g.state[s], m); err == nil {
			if m == projections.MoveSwitch && from != s && g.state[from] == projections.StateActive {
				g.state[from] = projections.StateSuspended
			}
			g.state[s] = to
		}
		switch m {
		case projections.MoveResume:
			g.add(s, schemas.TypeSessionResume, "user", schemas.SessionResume{})
		case projections.MoveSwitch:
			g.add(s, schemas.TypeSessionSwitch, "user", schemas.SessionSwitch{From: from})
		case projections.MoveSuspend:
			g.add(s, schemas.TypeSessionSuspend, "user", schemas.SessionSuspend{})
		case projections.MoveComplete:
			g.add(s, schemas.TypeSessionComplete, "user", schemas.SessionComplete{Summary: "done"})
		case projections.MoveFail:
			g.add(s, schemas.TypeSessionFail, "user", schemas.SessionFail{Reason: "boom"})
		}
	case k == 3:
		g.add(g.session(), schemas.TypeSessionContextSet, "user", schemas.SessionContextSet{CurrentTask: fmt.Sprintf("t%d", len(g.envs))})
	case k == 4:
		g.execute(legal)
	case k <= 7:
		g.progress(legal)
	case k == 8:
		if len(g.corrs) > 0 && rapid.Bool().Draw(g.t, "answer") {
			s, corr := splitSC(rapid.SampledFrom(g.corrs).Draw(g.t, "question"))
			g.add(s, schemas.TypeClarificationResponse, "user", schemas.ClarificationResponse{Answer: "yes", InReplyTo: corr})
			return
		}
		s, corr := g.session(), fmt.Sprintf("q%d", len(g.envs))
		g.corrs = append(g.corrs, s+"/"+corr)
		g.add(s, schemas.TypeClarificationRequest, "tester", schemas.ClarificationRequest{Question: "?", Asker: "tester"})
		g.envs[len(g.envs)-1].CorrelationID = corr
	case k == 9:
		call := fmt.Sprintf("l%d", len(g.envs))
		if len(g.calls) > 0 && !legal {
			call = rapid.SampledFrom(g.calls).Draw(g.t, "dup")
		}
		g.calls = append(g.calls, call)
		g.add(g.session(), schemas.TypeLLMResponse, "engineer", schemas.LLMResponse{CallID: call, Model: "m", Content: "c"})
	case k == 10:
		scope := schemas.ScopeSession
		s := g.session()
		if rapid.IntRange(0, 3).Draw(g.t, "all") == 0 {
			scope, s = schemas.ScopeAll, schemas.SystemSession
		}
		action := rapid.SampledFrom([]string{schemas.SignalPause, schemas.SignalResume, schemas.SignalCancel}).Draw(g.t, "action")
		if action == schemas.SignalCancel {
			for _, d := range g.dags {
				if !d.finished && (scope == schemas.ScopeAll || d.session == s) {
					for _, n := range d.nodes {
						if !n.state.Done() {
							n.state = projections.NodeCancelled
						}
					}
				}
			}
		}
		g.add(s, schemas.TypeSignal, "user", schemas.Signal{Action: action, Scope: scope})
	case k == 11:
		// The Archivalist's record, its clock sometimes behind the stream's
		// order; an illegal one has no category.
		cat := rapid.SampledFrom([]string{"outcome", "failure", "decision"}).Draw(g.t, "category")
		if !legal {
			cat = ""
		}
		g.add(g.session(), schemas.TypeHistoryEntry, "archivalist", schemas.HistoryEntry{Category: cat, Summary: fmt.Sprintf("h%d", len(g.envs))})
		if rapid.Bool().Draw(g.t, "late") {
			env := g.envs[len(g.envs)-1]
			env.Timestamp = env.Timestamp.Add(-time.Duration(rapid.IntRange(1, 30).Draw(g.t, "behind")) * time.Second)
		}
	default:
		g.progress(legal)
	}
}

func splitSC(x string) (string, string) {
	for i := range x {
		if x[i] == '/' {
			return x[:i], x[i+1:]
		}
	}
	return x, ""
}

func (g *gen) execute(legal bool) {
	s := g.session()
	d := &gdag{session: s, id: fmt.Sprintf("d%d", len(g.dags))}
	n := rapid.IntRange(1, 5).Draw(g.t, "nodes")
	spec := schemas.DAG{ID: d.id}
	layer := map[int]int{}
	for i := range n {
		node := &gnode{id: fmt.Sprintf("n%d", i), state: projections.NodeReady}
		sn := schemas.Node{ID: node.id, Agent: "engineer", Tool: "exec"}
		for j := range i {
			if rapid.IntRange(0, 2).Draw(g.t, "dep") == 0 {
				node.deps = append(node.deps, j)
				sn.DependsOn = append(sn.DependsOn, fmt.Sprintf("n%d", j))
				layer[i] = max(layer[i], layer[j]+1)
				node.state = projections.NodePending
			}
		}
		d.layers = max(d.layers, layer[i]+1)
		d.nodes = append(d.nodes, node)
		spec.Nodes = append(spec.Nodes, sn)
	}
	if !legal && n > 1 {
		spec.Nodes[0].DependsOn = append(spec.Nodes[0].DependsOn, spec.Nodes[n-1].ID) // a cycle or worse
		d.finished = true
	}
	g.dags = append(g.dags, d)
	g.add(s, schemas.TypeDAGExecute, "architect", schemas.DAGExecute{DAG: spec})
}

func (g *gen) progress(legal bool) {
	var open []*gdag
	for _, d := range g.dags {
		if !d.finished {
			open = append(open, d)
		}
	}
	if len(open) == 0 {
		g.execute(true)
		return
	}
	d := rapid.SampledFrom(open).Draw(g.t, "dag")
	s := d.session
	if !legal {
		s = g.session() // maybe the wrong session
	}
	allDone := true
	for _, n := range d.nodes {
		allDone = allDone && n.state.Done()
	}
	if allDone || rapid.IntRange(0, 30).Draw(g.t, "early") == 0 {
		if rapid.Bool().Draw(g.t, "cp") && d.checkpoint < d.layers {
			g.add(s, schemas.TypeCheckpoint, "orchestrator", schemas.Checkpoint{DAGID: d.id, Layer: d.checkpoint})
			d.checkpoint++
			return
		}
		outcome := schemas.OutcomeSucceeded
		for _, n := range d.nodes {
			if n.state == projections.NodeFailed {
				outcome = schemas.OutcomeFailed
			}
			if !n.state.Done() {
				n.state = projections.NodeCancelled
			}
		}
		d.finished = true
		g.add(s, schemas.TypeWorkflowComplete, "orchestrator", schemas.WorkflowComplete{DAGID: d.id, Outcome: outcome})
		return
	}
	i := rapid.IntRange(0, len(d.nodes)-1).Draw(g.t, "node")
	n := d.nodes[i]
	ready := func() {
		for _, m := range d.nodes {
			if m.state != projections.NodePending {
				continue
			}
			ok := true
			for _, dep := range m.deps {
				ok = ok && d.nodes[dep].state == projections.NodeSucceeded
			}
			if ok {
				m.state = projections.NodeReady
			}
		}
	}
	switch n.state {
	case projections.NodeReady:
		n.attempt++
		n.state = projections.NodeDispatched
		g.add(s, schemas.TypeTaskDispatch, "orchestrator", schemas.TaskDispatch{DAGID: d.id, NodeID: n.id, Attempt: n.attempt, Agent: "engineer"})
	case projections.NodeDispatched, projections.NodeRunning:
		switch rapid.IntRange(0, 3).Draw(g.t, "what") {
		case 0:
			// Now and then the same call again: a tool run cut off by a
			// crash is called again under its call id.
			if n.call == "" || rapid.IntRange(0, 3).Draw(g.t, "new call") > 0 {
				n.call = fmt.Sprintf("c-%s-%s-%d", d.id, n.id, len(g.envs))
			}
			n.state = projections.NodeRunning
			g.add(s, schemas.TypeToolCall, "engineer", schemas.ToolCall{CallID: n.call, Tool: "exec", DAGID: d.id, NodeID: n.id, Attempt: n.attempt})
		case 1:
			if n.call != "" {
				g.add(s, schemas.TypeToolResult, "engineer", schemas.ToolResult{CallID: n.call, Tool: "exec", OK: true, DAGID: d.id, NodeID: n.id, Attempt: n.attempt})
				return
			}
			fallthrough
		case 2:
			n.state = projections.NodeSucceeded
			ready()
			g.add(s, schemas.TypeTaskComplete, "engineer", schemas.TaskComplete{DAGID: d.id, NodeID: n.id, Attempt: n.attempt, Summary: "ok"})
		default:
			n.state = projections.NodeFailed
			g.add(s, schemas.TypeTaskFailed, "engineer", schemas.TaskFailed{DAGID: d.id, NodeID: n.id, Attempt: n.attempt, Error: "x", Retryable: true})
		}
	case projections.NodeFailed:
		if rapid.Bool().Draw(g.t, "retry") {
			n.attempt++
			n.state = projections.NodeReady
			g.add(s, schemas.TypeNodeRetry, "orchestrator", schemas.NodeRetry{DAGID: d.id, NodeID: n.id, Attempt: n.attempt})
			return
		}
		for _, m := range d.nodes {
			if m.state == projections.NodePending {
				m.state = projections.NodeSkipped
				g.add(s, schemas.TypeNodeSkipped, "orchestrator", schemas.NodeSkipped{DAGID: d.id, NodeID: m.id, Reason: "dependency failed"})
				return
			}
		}
		g.add(s, schemas.TypeDAGStatus, "orchestrator", schemas.DAGStatus{DAGID: d.id, State: "running"})
	default:
		// pending or done: an event its state refuses, or a skip.
		if n.state == projections.NodePending && legal {
			n.state = projections.NodeSkipped
			g.add(s, schemas.TypeNodeSkipped, "orchestrator", schemas.NodeSkipped{DAGID: d.id, NodeID: n.id, Reason: "skip"})
			return
		}
		g.add(s, schemas.TypeTaskComplete, "engineer", schemas.TaskComplete{DAGID: d.id, NodeID: n.id, Attempt: n.attempt})
	}
}

// view is a session's state for comparing a live fold with SessionAsOf;
// the focus is global, so it is left out.
func view(t *rapid.T, ctx context.Context, store *projections.Store, session string) string {
	v := projections.SessionView{}
	var err error
	if v.Session, err = store.Session(ctx, session); err != nil {
		t.Fatalf("session %s: %v", session, err)
	}
	v.Session.Focused = false
	if v.DAGs, err = store.DAGs(ctx, projections.DAGFilter{Session: session}); err != nil {
		t.Fatal(err)
	}
	if v.DAGs == nil {
		v.DAGs = []*projections.DAG{}
	}
	if v.Checkpoints, err = store.Checkpoints(ctx, session, ""); err != nil {
		t.Fatal(err)
	}
	if v.Pending, err = store.Pending(ctx, session); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// TestRestartsMatchRebuild: for random event sequences, folding them live
// (Run) or in catch-ups, with clean restarts and crashes (unsynced writes
// lost) at random points and random batch and cache sizes, ends in exactly
// the state of one clean rebuild, key by key. It also checks that a session's
// state as of each restart point, folded from its log alone, is what the live
// fold showed then.
// freshEvents empties b's stream and draws up to max random events (not
// appended).
func freshEvents(ctx context.Context, rt *rapid.T, b *broker.Broker, max int) *gen {
	purge(ctx, rt, b)
	g := &gen{t: rt, state: map[string]projections.SessionState{}}
	for range rapid.IntRange(1, max).Draw(rt, "events") {
		g.step()
	}
	return g
}

// purge empties b's stream.
func purge(ctx context.Context, rt *rapid.T, b *broker.Broker) {
	stream, err := b.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		rt.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		rt.Fatal(err)
	}
}

// crashable is a store on a filesystem that can crash: a restart may lose
// a random part of what was not synced.
type crashable struct {
	ctx   context.Context
	rt    *rapid.T
	opts  projections.Options
	fs    *vfs.MemFS
	store *projections.Store
}

// openCrashable opens a store with random batch (up to maxBatch events, and
// a few bytes to 64 KiB: objects a rebuild held are written in batches of
// that size) and cache sizes on a crashable filesystem.
func openCrashable(ctx context.Context, rt *rapid.T, maxBatch int) *crashable {
	c := &crashable{ctx: ctx, rt: rt, fs: vfs.NewCrashableMem(), opts: projections.Options{
		Dir:         "/p",
		BatchEvents: rapid.IntRange(1, maxBatch).Draw(rt, "batch"),
		BatchBytes:  rapid.IntRange(1, 64<<10).Draw(rt, "batch bytes"),
		CacheBytes:  rapid.Int64Range(0, 16<<10).Draw(rt, "cache bytes"),
		BatchDelay:  time.Millisecond,
	}}
	c.open()
	return c
}

func (c *crashable) open() {
	o := c.opts
	o.FS = c.fs
	s, err := projections.Open(c.ctx, o)
	if err != nil {
		c.rt.Fatalf("open: %v", err)
	}
	c.store = s
}

// project folds the stream up to last: live (committed without a sync) or
// by a catch-up, as drawn.
func (c *crashable) project(log *events.Log, last uint64) {
	if !rapid.Bool().Draw(c.rt, "live") {
		if _, err := c.store.Projector(log).CatchUp(c.ctx); err != nil {
			c.rt.Fatalf("catch up: %v", err)
		}
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan error, 1)
	go func() { done <- c.store.Projector(log).Run(ctx) }()
	if err := c.store.WaitFor(c.ctx, last); err != nil {
		c.rt.Fatalf("wait for %d: %v", last, err)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		c.rt.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// restart closes the store cleanly or, with crash, crashes it, losing a
// random part of its unsynced writes, and opens it again.
func (c *crashable) restart(crash bool) {
	if crash {
		seed := rapid.Int64().Draw(c.rt, "crash seed")
		clone := c.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rapid.IntRange(0, 100).Draw(c.rt, "kept"), RNG: rand.New(rand.NewPCG(uint64(seed), 1))})
		c.store.Close()
		c.fs = clone
	} else if err := c.store.Close(); err != nil {
		c.rt.Fatal(err)
	}
	c.open()
}

func TestRestartsMatchRebuild(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		f.Value.Set("30") // each check folds on a real broker; keep the suite quick
		defer f.Value.Set("100")
	}
	// Audit chunks of three items: the checks' audit entries fill and seal
	// chunks, and tool results complete entries in sealed ones.
	projections.SetAuditChunkItems(t, 3)
	b := brokertest.StartMutable(t) // each check starts from an emptied stream
	log := events.New(b.JetStream())
	// Thirty checks, each folding on a real broker, may take minutes on a
	// loaded 2-core machine: the deadline is a guard against a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 5*brokertest.Timeout)
	defer cancel()
	rapid.Check(t, func(rt *rapid.T) {
		g := freshEvents(ctx, rt, b, 120)
		cs := openCrashable(ctx, rt, 40)
		defer func() { cs.store.Close() }()
		type point struct {
			seq     uint64
			session string
			view    string
		}
		var points []point
		rest := g.envs
		var last uint64
		for len(rest) > 0 {
			n := rapid.IntRange(1, len(rest)).Draw(rt, "chunk")
			seqs, err := log.AppendBatch(ctx, rest[:n])
			if err != nil {
				rt.Fatalf("append: %v", err)
			}
			rest, last = rest[n:], seqs[len(seqs)-1]
			cs.project(log, last)
			if len(g.sessions) > 0 {
				s := rapid.SampledFrom(g.sessions).Draw(rt, "as-of session")
				if _, err := cs.store.Session(ctx, s); err == nil {
					points = append(points, point{last, s, view(rt, ctx, cs.store, s)})
				}
			}
			if r := rapid.IntRange(0, 2).Draw(rt, "restart"); r > 0 {
				cs.restart(r == 2)
			}
		}
		if got, err := cs.store.Projector(log).CatchUp(ctx); err != nil || got != last {
			rt.Fatalf("final catch up = %d, %v; want %d", got, err, last)
		}
		if _, err := cs.store.Verify(ctx, log); err != nil {
			rt.Fatalf("live fold with restarts differs from a clean rebuild: %v", err)
		}
		for _, p := range points {
			v, err := cs.store.SessionAsOf(ctx, p.session, projections.AsOf{Seq: p.seq})
			if err != nil {
				rt.Fatalf("as of %d: %v", p.seq, err)
			}
			v.Session.Focused = false
			v.AsOf = 0
			got, _ := json.MarshalIndent(v, "", " ")
			if string(got) != p.view {
				rt.Fatalf("session %s as of seq %d:\n%s\nlive then:\n%s", p.session, p.seq, got, p.view)
			}
		}
	})
}
