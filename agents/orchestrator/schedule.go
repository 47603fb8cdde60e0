package orchestrator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// next works out what follows from a running DAG's state: retries of failed
// nodes, skips, dispatches of ready nodes, checkpoints of completed layers and,
// once every node is done, the workflow's end.
func next(dag *projections.DAG, def *definition, cps []*projections.Checkpoint, now time.Time) ([]*schemas.Envelope, error) {
	s := &stepper{dag: dag, def: def, now: now, state: map[string]projections.NodeState{}, attempt: map[string]int{}}
	for _, n := range dag.Nodes {
		s.state[n.ID], s.attempt[n.ID] = n.State, n.Attempt
	}
	s.retryOrGiveUp()
	s.skipUnreachable()
	s.dispatchReady()
	s.checkpoint(cps)
	s.complete()
	if s.err != nil {
		return nil, agents.Permanent(s.err)
	}
	return s.outs, nil
}

type stepper struct {
	dag     *projections.DAG
	def     *definition
	now     time.Time
	state   map[string]projections.NodeState // as it will be after outs
	attempt map[string]int                   // each node's current attempt
	outs    []*schemas.Envelope
	failed  []string // failed for good
	err     error
}

func (s *stepper) emit(t schemas.Type, target, key string, payload any) {
	if s.err != nil {
		return
	}
	e, err := derive(s.def, s.dag, t, target, key, s.now, payload)
	if err != nil {
		s.err = err
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
	for _, n := range s.dag.Nodes {
		if n.State != projections.NodeFailed {
			continue
		}
		r := s.retryPolicy(n.ID)
		if !n.Retryable || n.Attempt > r.Max {
			s.failed = append(s.failed, n.ID)
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
		s.err = fmt.Errorf("DAG %s: node %s not in its definition", s.dag.ID, id)
		return
	}
	// A pipeline node goes to the pipeline agent, which runs its Engineer,
	// Inspector and Tester.
	target := n.Agent
	if n.Pipeline != "" {
		target = PipelineAgent
	}
	s.emit(schemas.TypeTaskDispatch, target, fmt.Sprintf("dispatch/%s/%d", id, attempt), schemas.TaskDispatch{
		DAGID: s.dag.ID, NodeID: id, Attempt: attempt, Agent: n.Agent, Tool: n.Tool, Args: n.Args, Prompt: n.Prompt,
		Timeout: n.Timeout, WorkDir: s.def.exec.WorkDir, Pipeline: n.Pipeline, NotBefore: notBefore,
	})
	s.state[id] = projections.NodeDispatched
}

func open(st projections.NodeState) bool {
	return st == projections.NodePending || st == projections.NodeReady
}

// skipUnreachable skips what can no longer run: with fail_fast, every node not
// started once a node has failed for good; otherwise the nodes downstream of a
// failed, skipped or cancelled one.
func (s *stepper) skipUnreachable() {
	if len(s.failed) > 0 && s.policy().FailFast {
		why := fmt.Sprintf("fail_fast: %s failed", strings.Join(s.failed, ", "))
		for _, id := range s.order() {
			if open(s.state[id]) {
				s.skip(id, why)
			}
		}
		return
	}
	for changed := true; changed; {
		changed = false
		for _, id := range s.order() {
			if !open(s.state[id]) {
				continue
			}
			for _, dep := range s.def.byID[id].DependsOn {
				switch st := s.state[dep]; st {
				case projections.NodeFailed, projections.NodeSkipped, projections.NodeCancelled:
					if st != projections.NodeFailed || slices.Contains(s.failed, dep) {
						s.skip(id, fmt.Sprintf("dependency %s %s", dep, st))
						changed = true
					}
				}
				if !open(s.state[id]) {
					break
				}
			}
		}
	}
}

func (s *stepper) skip(id, reason string) {
	s.emit(schemas.TypeNodeSkipped, "user", "skip/"+id, schemas.NodeSkipped{DAGID: s.dag.ID, NodeID: id, Reason: reason})
	s.state[id] = projections.NodeSkipped
}

// order is the nodes by layer, then as the plan lists them.
func (s *stepper) order() []string {
	var ids []string
	for _, layer := range s.dag.Layers {
		ids = append(ids, layer...)
	}
	return ids
}

// dispatchReady dispatches the nodes whose dependencies all succeeded, up to
// the policy's concurrency.
func (s *stepper) dispatchReady() {
	if len(s.failed) > 0 && s.policy().FailFast {
		return
	}
	limit := s.policy().MaxConcurrency
	if limit <= 0 {
		limit = DefaultMaxConcurrency
	}
	busy := 0
	for _, st := range s.state {
		if st == projections.NodeDispatched || st == projections.NodeRunning {
			busy++
		}
	}
	for _, id := range s.order() {
		if busy >= limit {
			return
		}
		if !open(s.state[id]) || !s.depsSucceeded(id) {
			continue
		}
		s.dispatch(id, max(s.attempt[id], 1), time.Time{})
		busy++
	}
}

func (s *stepper) depsSucceeded(id string) bool {
	for _, dep := range s.def.byID[id].DependsOn {
		if s.state[dep] != projections.NodeSucceeded {
			return false
		}
	}
	return true
}

// checkpoint records each layer whose nodes are all done, once.
func (s *stepper) checkpoint(cps []*projections.Checkpoint) {
	recorded := make(map[int]bool, len(cps))
	for _, c := range cps {
		if c.DAG == s.dag.ID {
			recorded[c.Layer] = true
		}
	}
	for i, layer := range s.dag.Layers {
		if recorded[i] {
			continue
		}
		cp := schemas.Checkpoint{DAGID: s.dag.ID, Layer: i}
		for _, id := range layer {
			switch s.state[id] {
			case projections.NodeSucceeded:
				cp.Succeeded = append(cp.Succeeded, id)
			case projections.NodeFailed:
				if !slices.Contains(s.failed, id) {
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
	var t tally
	for _, n := range s.dag.Nodes {
		st := s.state[n.ID]
		switch {
		case st == projections.NodeSucceeded:
			t.succeeded++
		case st == projections.NodeFailed && slices.Contains(s.failed, n.ID):
			t.failed++
		case st == projections.NodeSkipped || st == projections.NodeCancelled:
			t.skipped++
		default:
			return
		}
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
