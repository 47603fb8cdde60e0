// Package orchestrator is the Orchestrator: it validates submitted DAGs and
// runs them under their policy (seed L25498-25550): it dispatches ready nodes
// up to max_concurrency, retries failed nodes with backoff, skips the
// dependents of a failed node (everything not started, with fail_fast),
// writes a checkpoint as each layer completes and ends with workflow_complete.
//
// It keeps no state of its own. Each message makes it read the DAG's
// projection, caught up with the message, its own earlier steps and what the
// projector has received of the stream, and append what follows from it. A
// step reads the DAG's frontier (counts, the first ready nodes, the
// failed and blocked ones) and the few nodes it decides about, never the whole
// DAG, so a step of a 10,000-node DAG costs what a step of a 10-node one does.
// The events it appends have ids fixed by the DAG and the node attempt, so
// two deliveries (or two Orchestrator processes) deciding the same step append
// it once.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Name is the Orchestrator's agent name.
const Name = "orchestrator"

// PipelineAgent runs the nodes that name a pipeline (agents/pipeline).
const PipelineAgent = "pipeline"

// Store is what the Orchestrator reads from the projections.
type Store interface {
	agents.Caught
	// Received is the last stream sequence the projector has received.
	Received() uint64
	OpenDAG(ctx context.Context, session, id string) (*projections.DAGSnapshot, error)
	DAGs(ctx context.Context, f projections.DAGFilter) ([]*projections.DAG, error)
}

// Orchestrator runs DAGs.
type Orchestrator struct {
	Store   Store
	Log     *events.Log
	Catalog plan.Catalog

	// definitions caches each running DAG's dag_execute event, read once by
	// stream sequence.
	mu          sync.Mutex
	definitions map[string]*definition
	// finished holds the DAGs last seen finished, oldest first (at most
	// maxFinished). A finished DAG takes no more events (see projections),
	// so the completions still queued for one are answered without waiting
	// for the projections to catch up: a wide DAG ends with hundreds queued.
	finished []string
}

// maxFinished bounds Orchestrator.finished.
const maxFinished = 1024

// definition is a DAG as submitted, with what a step looks up in it.
type definition struct {
	env        *schemas.Envelope
	exec       *schemas.DAGExecute
	byID       map[string]*schemas.Node
	index      map[string]int      // node id -> place in the plan
	layers     [][]string          // by longest path, as the projection has them
	dependents map[string][]string // node id -> the nodes depending on it
}

// Handle takes the messages addressed to the Orchestrator.
func (o *Orchestrator) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	switch d.Env.Type {
	case schemas.TypeDAGExecute:
		p, err := schemas.PayloadAs[schemas.DAGExecute](d.Env)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		if err := plan.Validate(&p.DAG, nil, o.Catalog); err != nil {
			var probs plan.Problems
			errors.As(err, &probs)
			out, derr := d.Derive(schemas.TypeDAGRejected, "user", "rejected", schemas.DAGRejected{DAGID: p.DAG.ID, Problems: probs})
			if derr != nil {
				return nil, agents.Permanent(derr)
			}
			return []*schemas.Envelope{out}, nil
		}
		return o.step(ctx, d, d.Env.SessionID, p.DAG.ID)
	case schemas.TypeSessionFork:
		return o.fork(ctx, d)
	case schemas.TypeTaskComplete, schemas.TypeTaskFailed, schemas.TypeTaskHelp, schemas.TypeNodeRetry:
		id, err := dagOf(d.Env)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		return o.step(ctx, d, d.Env.SessionID, id)
	case schemas.TypeSignal:
		return o.signal(ctx, d)
	case schemas.TypeValidationResult, schemas.TypeDAGStatus:
		return nil, nil
	}
	return nil, agents.Unhandled(Name, d.Env.Type)
}

func dagOf(env *schemas.Envelope) (string, error) {
	switch env.Type {
	case schemas.TypeTaskComplete:
		p, err := schemas.PayloadAs[schemas.TaskComplete](env)
		if err != nil {
			return "", err
		}
		return p.DAGID, nil
	case schemas.TypeTaskFailed:
		p, err := schemas.PayloadAs[schemas.TaskFailed](env)
		if err != nil {
			return "", err
		}
		return p.DAGID, nil
	case schemas.TypeTaskHelp:
		p, err := schemas.PayloadAs[schemas.TaskHelp](env)
		if err != nil {
			return "", err
		}
		return p.DAGID, nil
	}
	p, err := schemas.PayloadAs[schemas.NodeRetry](env)
	if err != nil {
		return "", err
	}
	return p.DAGID, nil
}

// fork goes on with the DAGs a fork inherited running: their nodes that were
// in flight at the fork point are ready again in the fork (see projections),
// and are dispatched anew here.
func (o *Orchestrator) fork(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	if err := o.catchUp(ctx); err != nil {
		return nil, err
	}
	dags, err := o.Store.DAGs(ctx, projections.DAGFilter{Session: d.Env.SessionID, State: projections.DAGRunning})
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	var outs []*schemas.Envelope
	for _, dag := range dags {
		more, err := o.step(ctx, d, dag.Session, dag.ID)
		if err != nil {
			return nil, err
		}
		outs = append(outs, more...)
	}
	return outs, nil
}

// step reads the DAG with d, the Orchestrator's earlier steps and what the
// projector has received applied, and returns its next steps.
func (o *Orchestrator) step(ctx context.Context, d *agents.Delivery, session, dagID string) ([]*schemas.Envelope, error) {
	if o.isFinished(session, dagID) {
		return nil, nil
	}
	// The message and this process's own earlier steps are what a step
	// must see (what came after the message has messages of its own); it
	// waits as well for the events the projector has received, so that it
	// decides from state as fresh as the stream's (the fold, left alone,
	// holds a busy stream's events up to BatchDelay before it commits them)
	// without asking the server for its last sequence at every step.
	if err := agents.CatchUpTo(ctx, o.Store, max(d.Floor(), o.Store.Received())); err != nil {
		return nil, err
	}
	snap, err := o.open(ctx, session, dagID)
	if err != nil {
		return nil, err
	}
	if snap.Frontier.State == projections.DAGRunning && snap.Frontier.Counts[projections.NodeCancelled] > 0 {
		// A cancel signal's handler is ending the DAG (the signal cancelled
		// its open nodes): read it caught up with the whole stream, as that
		// handler does, so its workflow_complete, if appended, is seen, and
		// this step does not end the DAG its own way.
		snap.Close()
		if err := o.catchUp(ctx); err != nil {
			return nil, err
		}
		if snap, err = o.open(ctx, session, dagID); err != nil {
			return nil, err
		}
	}
	defer snap.Close()
	dag := snap.Frontier
	if dag.State != projections.DAGRunning {
		o.forget(dag.Session, dag.ID)
		return nil, nil
	}
	def, err := o.definition(ctx, dag.Session, dag.ID, dag.CreatedSeq)
	if err != nil {
		return nil, err
	}
	return next(snap, def, time.Now())
}

// open opens a snapshot of a session's DAG.
func (o *Orchestrator) open(ctx context.Context, session, dagID string) (*projections.DAGSnapshot, error) {
	snap, err := o.Store.OpenDAG(ctx, session, dagID)
	if errors.Is(err, projections.ErrNotFound) {
		return nil, agents.Permanent(fmt.Errorf("DAG %q in session %s: %w", dagID, session, err))
	}
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	return snap, nil
}

// catchUp waits until the projections have applied everything in the stream,
// this Orchestrator's own earlier steps included.
func (o *Orchestrator) catchUp(ctx context.Context) error {
	return agents.CatchUp(ctx, o.Log, o.Store)
}

// definition reads the dag_execute (at seq) of a session's DAG once, and
// keeps it while the DAG runs.
func (o *Orchestrator) definition(ctx context.Context, session, dagID string, seq uint64) (*definition, error) {
	o.mu.Lock()
	def, ok := o.definitions[defKey(session, dagID)]
	o.mu.Unlock()
	if ok {
		return def, nil
	}
	ev, err := o.Log.Get(ctx, seq)
	if err != nil {
		return nil, agents.Transient(fmt.Errorf("DAG %s definition at seq %d: %w", dagID, seq, err), 0)
	}
	if ev.Env == nil || ev.Env.Type != schemas.TypeDAGExecute {
		return nil, agents.Permanent(fmt.Errorf("DAG %s: seq %d is not its dag_execute", dagID, seq))
	}
	exec, err := schemas.PayloadAs[schemas.DAGExecute](ev.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	env := ev.Env
	if env.SessionID != session {
		// A fork's DAG, defined in an ancestor: the fork's steps derive from
		// a copy in the fork, with an id of its own, so their ids differ from
		// the ancestor's steps.
		cp := *env
		cp.ID, cp.SessionID = schemas.DeriveID(env, "fork/"+session), session
		env = &cp
	}
	n := len(exec.DAG.Nodes)
	def = &definition{env: env, exec: exec, byID: make(map[string]*schemas.Node, n), index: make(map[string]int, n), dependents: map[string][]string{}}
	for i := range exec.DAG.Nodes {
		nd := &exec.DAG.Nodes[i]
		def.byID[nd.ID], def.index[nd.ID] = nd, i
		for _, dep := range nd.DependsOn {
			def.dependents[dep] = append(def.dependents[dep], nd.ID)
		}
	}
	def.layers, _, _ = projections.Plan(exec.DAG)
	o.mu.Lock()
	if o.definitions == nil {
		o.definitions = map[string]*definition{}
	}
	o.definitions[defKey(session, dagID)] = def
	o.mu.Unlock()
	return def, nil
}

func defKey(session, dagID string) string { return session + "/" + dagID }

// forget drops a finished DAG's definition and remembers it finished.
func (o *Orchestrator) forget(session, dagID string) {
	k := defKey(session, dagID)
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.definitions, k)
	if slices.Contains(o.finished, k) {
		return
	}
	if len(o.finished) == maxFinished {
		o.finished = slices.Delete(o.finished, 0, 1)
	}
	o.finished = append(o.finished, k)
}

func (o *Orchestrator) isFinished(session, dagID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.finished, defKey(session, dagID))
}

// signal: a cancel ends the running DAGs it covers; pause and resume are the
// runners' business (they hold the session's messages).
func (o *Orchestrator) signal(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.Signal](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if p.Action != schemas.SignalCancel {
		return nil, nil
	}
	if err := o.catchUp(ctx); err != nil {
		return nil, err
	}
	f := projections.DAGFilter{State: projections.DAGRunning}
	if p.Scope != schemas.ScopeAll {
		f.Session = d.Env.SessionID
	}
	dags, err := o.Store.DAGs(ctx, f)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	var outs []*schemas.Envelope
	for _, dag := range dags {
		def, err := o.definition(ctx, dag.Session, dag.ID, dag.CreatedSeq)
		if err != nil {
			return nil, err
		}
		c := counts(dag.Nodes)
		e, err := derive(def, dag.ID, schemas.TypeWorkflowComplete, "user", "complete", d.Now(), schemas.WorkflowComplete{
			DAGID: dag.ID, Outcome: schemas.OutcomeCancelled, Succeeded: c.succeeded, Failed: c.failed, Skipped: c.skipped + c.open,
			Summary:  fmt.Sprintf("cancelled: %d succeeded, %d failed, %d not run (%s)", c.succeeded, c.failed, c.skipped+c.open, reason(p.Reason)),
			Duration: d.Now().Sub(dag.CreatedAt),
		})
		if err != nil {
			return nil, agents.Permanent(err)
		}
		outs = append(outs, e)
		o.forget(dag.Session, dag.ID)
	}
	return outs, nil
}

func reason(r string) string {
	if r == "" {
		return "by signal"
	}
	return r
}

// derive builds an event of the DAG's with an id fixed by the DAG and key, so
// that whoever decides the same step first, it is appended once.
func derive(def *definition, dagID string, t schemas.Type, target, key string, now time.Time, payload any) (*schemas.Envelope, error) {
	e, err := def.env.Derive(t, Name, target, now, payload)
	if err != nil {
		return nil, err
	}
	e.ID = schemas.DeriveID(def.env, Name+"/"+dagID+"/"+key)
	return e, nil
}

type tally struct{ succeeded, failed, skipped, open int }

func counts(nodes []*projections.Node) tally {
	var t tally
	for _, n := range nodes {
		switch n.State {
		case projections.NodeSucceeded:
			t.succeeded++
		case projections.NodeFailed:
			t.failed++
		case projections.NodeSkipped, projections.NodeCancelled:
			t.skipped++
		default:
			t.open++
		}
	}
	return t
}
