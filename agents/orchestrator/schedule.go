package orchestrator

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// next works out what follows from a running DAG's state: retries of failed
// nodes, skips, dispatches of ready nodes, checkpoints of completed layers and,
// once every node is done, the workflow's end. It reads the frontier and the
// nodes it decides about, not the whole DAG.
func next(snap *projections.DAGSnapshot, def *definition, now time.Time) ([]*schemas.Envelope, error) {
	dag := snap.Frontier
	s := &stepper{dag: dag, snap: snap, def: def, now: now, state: map[string]projections.NodeState{},
		nodes: map[string]*projections.Node{}, counts: maps.Clone(dag.Counts), gaveUp: map[string]bool{}}
	s.retryOrGiveUp()
	s.skipUnreachable()
	s.dispatchReady()
	s.checkpoint()
	s.complete()
	if s.err != nil {
		return nil, s.err
	}
	return s.outs, nil
}

type stepper struct {
	dag   *projections.Frontier
	snap  *projections.DAGSnapshot
	def   *definition
	now   time.Time
	state map[string]projections.NodeState // the nodes this step changes, as they will be after outs
	nodes map[string]*projections.Node     // the nodes read so far
	// counts are the frontier's counts as they will be after outs.
	counts  map[projections.NodeState]int
	outs    []*schemas.Envelope
	failed  []string        // failed for good
	gaveUp  map[string]bool // the same, as a set
	skipped bool            // this step skips nodes
	err     error
}

func (s *stepper) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// node reads a node of the DAG (once per step).
func (s *stepper) node(id string) *projections.Node {
	if n, ok := s.nodes[id]; ok {
		return n
	}
	i, ok := s.def.index[id]
	if !ok {
		s.fail(agents.Permanent(fmt.Errorf("DAG %s: node %s not in its definition", s.dag.ID, id)))
		return nil
	}
	n, err := s.snap.Node(i)
	if err != nil {
		s.fail(agents.Transient(err, 0))
		return nil
	}
	s.nodes[id] = n
	return n
}

// stateOf is a node's state as it will be after outs.
func (s *stepper) stateOf(id string) projections.NodeState {
	if st, ok := s.state[id]; ok {
		return st
	}
	if n := s.node(id); n != nil {
		return n.State
	}
	return ""
}

// set records that outs move node id to state st.
func (s *stepper) set(id string, st projections.NodeState) {
	s.counts[s.stateOf(id)]--
	s.counts[st]++
	s.state[id] = st
}

func (s *stepper) emit(t schemas.Type, target, key string, payload any) {
	if s.err != nil {
		return
	}
	e, err := derive(s.def, s.dag.ID, t, target, key, s.now, payload)
	if err != nil {
		s.fail(agents.Permanent(err))
		return
	}
	s.outs = append(s.outs, e)
}

func (s *stepper) policy() schemas.Policy { return s.def.exec.DAG.Policy }

func (s *stepper) retryPolicy(id string) schemas.Retry {
	if n := s.def.byID[id]; n != nil && n.Retry != nil {
		return *n.Retry
	}
	return s.policy().Retry
}

// retryOrGiveUp schedules another attempt of each retryable failed node that
// has attempts left (retry.max further attempts, backoff doubling each time).
func (s *stepper) retryOrGiveUp() {
	for _, f := range s.dag.Failed {
		n := s.node(f.ID)
		if n == nil || n.State != projections.NodeFailed {
			continue
		}
		r := s.retryPolicy(n.ID)
		if !n.Retryable || n.Attempt > r.Max {
			s.failed = append(s.failed, n.ID)
			s.gaveUp[n.ID] = true
			continue
		}
		attempt := n.Attempt + 1
		notBefore := s.now.Add(backoff(r.Backoff, n.Attempt))
		s.emit(schemas.TypeNodeRetry, "user", fmt.Sprintf("retry/%s/%d", n.ID, attempt), schemas.NodeRetry{
			DAGID: s.dag.ID, NodeID: n.ID, Attempt: attempt, NotBefore: notBefore, Reason: n.LastError,
		})
		s.dispatch(n.ID, attempt, notBefore)
	}
}

// backoff is the wait before the attempt after `attempt`: base, doubled for each
// earlier retry.
func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt; i++ {
		d *= 2
	}
	return d
}

func (s *stepper) dispatch(id string, attempt int, notBefore time.Time) {
	n := s.def.byID[id]
	if n == nil {
		s.fail(agents.Permanent(fmt.Errorf("DAG %s: node %s not in its definition", s.dag.ID, id)))
		return
	}
	// A pipeline node goes to the pipeline agent, which runs its Engineer,
	// Inspector and Tester.
	target := n.Agent
	if n.Pipeline != "" {
		target = PipelineAgent
	}
	s.emit(schemas.TypeTaskDispatch, target, fmt.Sprintf("dispatch/%s/%d", id, attempt), schemas.TaskDispatch{
		DAGID: s.dag.ID, NodeID: id, Attempt: attempt, Agent: n.Agent, Tool: n.Tool, Args: n.Args, Prompt: n.Prompt, Skills: n.Skills,
		Timeout: n.Timeout, WorkDir: s.def.exec.WorkDir, Pipeline: n.Pipeline, NotBefore: notBefore,
	})
	s.set(id, projections.NodeDispatched)
}

func open(st projections.NodeState) bool {
	return st == projections.NodePending || st == projections.NodeReady
}

// skipUnreachable skips what can no longer run: with fail_fast, every node not
// started once a node has failed for good; otherwise the nodes downstream of a
// node failed for good, skipped or cancelled.
func (s *stepper) skipUnreachable() {
	if len(s.failed) > 0 && s.policy().FailFast {
		if s.counts[projections.NodePending]+s.counts[projections.NodeReady] == 0 {
			return // skipped by an earlier step
		}
		nodes, err := s.snap.Nodes()
		if err != nil {
			s.fail(agents.Transient(err, 0))
			return
		}
		for _, n := range nodes {
			s.nodes[n.ID] = n
		}
		why := fmt.Sprintf("fail_fast: %s failed", strings.Join(s.failed, ", "))
		for _, id := range s.order() {
			if open(s.stateOf(id)) {
				s.skip(id, why)
			}
		}
		return
	}
	// The frontier lists the open nodes with a dead dependency (blocked): a
	// step reads those, not the DAG. Those whose dependency is dead for good
	// are skipped, and with them every open node downstream (which the
	// projection does not know to be blocked until the skips are applied).
	var queue []string
	for _, b := range s.dag.Blocked {
		if st, ok := s.state[b.ID]; ok && !open(st) {
			continue
		}
		for _, dep := range s.def.byID[b.ID].DependsOn {
			st := s.stateOf(dep)
			if st == projections.NodeSkipped || st == projections.NodeCancelled || st == projections.NodeFailed && s.gaveUp[dep] {
				s.skip(b.ID, fmt.Sprintf("dependency %s %s", dep, st))
				queue = append(queue, b.ID)
				break
			}
		}
	}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, id := range s.def.dependents[from] {
			if open(s.stateOf(id)) {
				s.skip(id, fmt.Sprintf("dependency %s %s", from, projections.NodeSkipped))
				queue = append(queue, id)
			}
		}
	}
}

func (s *stepper) skip(id, reason string) {
	s.emit(schemas.TypeNodeSkipped, "user", "skip/"+id, schemas.NodeSkipped{DAGID: s.dag.ID, NodeID: id, Reason: reason})
	s.set(id, projections.NodeSkipped)
	s.skipped = true
}

// order is the nodes by layer, then as the plan lists them.
func (s *stepper) order() []string {
	var ids []string
	for _, layer := range s.def.layers {
		ids = append(ids, layer...)
	}
	return ids
}

// dispatchReady dispatches the first ready nodes (in the frontier's order: by
// layer, then as the plan lists them) up to the policy's concurrency.
func (s *stepper) dispatchReady() {
	if len(s.failed) > 0 && s.policy().FailFast {
		return
	}
	limit := s.policy().MaxConcurrency
	if limit <= 0 {
		limit = projections.DefaultMaxConcurrency
	}
	busy := s.counts[projections.NodeDispatched] + s.counts[projections.NodeRunning]
	for _, r := range s.dag.Ready {
		if busy >= limit {
			return
		}
		if st, ok := s.state[r.ID]; ok && !open(st) {
			continue
		}
		s.nodes[r.ID] = &projections.Node{ID: r.ID, State: projections.NodeReady, Attempt: r.Attempt}
		s.dispatch(r.ID, max(r.Attempt, 1), time.Time{})
		busy++
	}
}

// checkpoint records each layer whose nodes are all done, once, in order. The
// frontier says which leading layers are done; only a step that skips nodes
// can finish a layer beyond them.
func (s *stepper) checkpoint() {
	for i := s.dag.Checkpointed; i < len(s.def.layers); i++ {
		if i >= s.dag.DoneLayers && !s.skipped {
			return
		}
		cp := schemas.Checkpoint{DAGID: s.dag.ID, Layer: i}
		for _, id := range s.def.layers[i] {
			switch s.stateOf(id) {
			case projections.NodeSucceeded:
				cp.Succeeded = append(cp.Succeeded, id)
			case projections.NodeFailed:
				if !s.gaveUp[id] {
					return // will be retried
				}
				cp.Failed = append(cp.Failed, id)
			case projections.NodeSkipped, projections.NodeCancelled:
				cp.Skipped = append(cp.Skipped, id)
			default:
				return // layers complete in order
			}
		}
		s.emit(schemas.TypeCheckpoint, "user", fmt.Sprintf("checkpoint/%d", i), cp)
	}
}

// complete ends the workflow once every node is done for good.
func (s *stepper) complete() {
	t := tally{
		succeeded: s.counts[projections.NodeSucceeded],
		failed:    s.counts[projections.NodeFailed],
		skipped:   s.counts[projections.NodeSkipped] + s.counts[projections.NodeCancelled],
	}
	if t.succeeded+t.failed+t.skipped < s.dag.Nodes || t.failed != len(s.failed) || s.err != nil {
		return
	}
	outcome := schemas.OutcomeSucceeded
	summary := fmt.Sprintf("all %d nodes succeeded", t.succeeded)
	if t.failed > 0 || t.skipped > 0 {
		outcome = schemas.OutcomeFailed
		summary = fmt.Sprintf("%d succeeded, %d failed (%s), %d skipped", t.succeeded, t.failed, strings.Join(s.failed, ", "), t.skipped)
	}
	s.emit(schemas.TypeWorkflowComplete, "user", "complete", schemas.WorkflowComplete{
		DAGID: s.dag.ID, Outcome: outcome, Summary: summary, Succeeded: t.succeeded, Failed: t.failed, Skipped: t.skipped,
		Duration: s.now.Sub(s.dag.CreatedAt),
	})
}
