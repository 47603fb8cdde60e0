package reexec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// A DAG's max_concurrency changes when its nodes are dispatched, not what any
// event says, and two runs of the same build interleave parallel nodes
// differently: the order of their events is no evidence. What is evidence is
// what a limit forbids. In stream order the Orchestrator never has more of a
// DAG's nodes in flight (dispatched, not yet finished) than its limit allows:
// its steps are serialized per session and each reads the DAG caught up with
// the stream. So a run that had more nodes in flight at once than the other
// run's limit allows could not have been produced under that limit: that is
// the divergence, at that dispatch. Runs under the same limit are never
// flagged; a change neither run's schedule shows (a DAG never that wide) is
// not a divergence. A plan that leaves max_concurrency at 0 ran under the
// default of the build that recorded it, which the recording does not say:
// the recording is checked against today's limit, and the new run against
// nothing.

// limitOf is the DAG id and the max_concurrency of a dag_execute's policy
// (0: the build's default).
func limitOf(env *schemas.Envelope) (string, int, bool) {
	if env.Type != schemas.TypeDAGExecute {
		return "", 0, false
	}
	p, err := schemas.PayloadAs[schemas.DAGExecute](env)
	if err != nil {
		return "", 0, false
	}
	return p.DAG.ID, p.DAG.Policy.MaxConcurrency, true
}

// effective is the limit a policy's max_concurrency sets in this build.
func effective(limit int) int {
	if limit <= 0 {
		return projections.DefaultMaxConcurrency
	}
	return limit
}

// inFlight follows, in stream order, the nodes of each DAG of each session
// dispatched and not yet finished. A fork's DAG starts with none: its nodes
// in flight at the fork point are dispatched again there (a continued
// what-if's are not counted, which can only miss a divergence).
type inFlight map[string][]string // session/DAG -> node ids, in dispatch order

// dispatch is one task_dispatch as inFlight saw it: the DAG and the nodes in
// flight with it, itself included.
type dispatch struct {
	dag   string
	nodes []string
}

// apply folds env; for a dispatch it returns what was in flight with it.
func (f inFlight) apply(env *schemas.Envelope) *dispatch {
	var dag, node string
	switch env.Type {
	case schemas.TypeTaskDispatch:
		p, err := schemas.PayloadAs[schemas.TaskDispatch](env)
		if err != nil {
			return nil
		}
		k := env.SessionID + "/" + p.DAGID
		if !slices.Contains(f[k], p.NodeID) {
			f[k] = append(f[k], p.NodeID)
		}
		return &dispatch{dag: p.DAGID, nodes: slices.Clone(f[k])}
	case schemas.TypeTaskComplete:
		if p, err := schemas.PayloadAs[schemas.TaskComplete](env); err == nil {
			dag, node = p.DAGID, p.NodeID
		}
	case schemas.TypeTaskFailed:
		if p, err := schemas.PayloadAs[schemas.TaskFailed](env); err == nil {
			dag, node = p.DAGID, p.NodeID
		}
	case schemas.TypeNodeRetry:
		if p, err := schemas.PayloadAs[schemas.NodeRetry](env); err == nil {
			dag, node = p.DAGID, p.NodeID
		}
	}
	if dag != "" {
		k := env.SessionID + "/" + dag
		f[k] = slices.DeleteFunc(f[k], func(n string) bool { return n == node })
	}
	return nil
}

// scheduleDivergences finds, for each DAG, the first dispatch of either run
// with more nodes in flight than the other run's limit allows.
func (e *engine) scheduleDivergences(consider func(float64, *Divergence)) {
	changed := false
	for dag, rec := range e.rec.limits {
		if now, ok := e.newLimits[dag]; ok && (rec == 0 || effective(rec) != effective(now)) {
			changed = true
		}
	}
	if !changed {
		return
	}
	// Each run's dispatches, with what was in flight with them.
	recorded, recFlight := map[uint64]*dispatch{}, inFlight{}
	for _, r := range e.rec.Events {
		if d := recFlight.apply(r.Env); d != nil {
			recorded[r.Seq] = d
		}
	}
	fresh, newFlight := map[string]*dispatch{}, inFlight{}
	for _, ev := range e.run {
		if ev.Env != nil {
			if d := newFlight.apply(ev.Env); d != nil {
				fresh[ev.Env.ID] = d
			}
		}
	}
	var recPoints, newPoints []flightPoint
	for _, r := range e.rec.Events {
		if d := recorded[r.Seq]; d != nil {
			p := flightPoint{pos: float64(r.Seq), dag: d.dag, input: e.input(r.Env.ID), rec: Normalize(r.Seq, r.Env), recNodes: d.nodes}
			if n := e.pairOf[r]; n != nil {
				p.new = Normalize(e.newSeq[n.ID], n)
				if nd := fresh[n.ID]; nd != nil {
					p.newNodes = nd.nodes
				}
			}
			recPoints = append(recPoints, p)
		}
	}
	for _, ev := range e.run {
		if ev.Env == nil || fresh[ev.Env.ID] == nil {
			continue
		}
		d := fresh[ev.Env.ID]
		p := flightPoint{pos: e.position(ev.Env.ID), dag: d.dag, input: e.input(ev.Env.ID), new: Normalize(ev.Seq, ev.Env), newNodes: d.nodes}
		if r := e.newToRec[ev.Env.ID]; r != nil {
			p.rec = Normalize(r.Seq, r.Env)
			if rd := recorded[r.Seq]; rd != nil {
				p.recNodes = rd.nodes
			}
		}
		newPoints = append(newPoints, p)
	}
	// The recording against today's limit, and the new run against the
	// recording's (when the plan sets it).
	e.beyondLimit(recPoints, "the recording", func(p flightPoint) []string { return p.recNodes }, func(_, now int) int { return effective(now) }, consider)
	e.beyondLimit(newPoints, "the new run", func(p flightPoint) []string { return p.newNodes }, func(rec, _ int) int {
		if rec == 0 {
			return -1
		}
		return rec
	}, consider)
}

// flightPoint is a dispatch of one run, beside its counterpart in the other,
// with the nodes in flight with each.
type flightPoint struct {
	pos                float64
	dag                string
	input, rec, new    *Event
	recNodes, newNodes []string
}

// beyondLimit considers, for each DAG, the first point at which whose run
// had more nodes in flight than allowed(recorded, new max_concurrency)
// (negative: no limit known).
func (e *engine) beyondLimit(points []flightPoint, whose string, nodes func(flightPoint) []string, allowed func(rec, now int) int,
	consider func(float64, *Divergence)) {
	flagged := map[string]bool{}
	for _, p := range points {
		rec, okr := e.rec.limits[p.dag]
		now, okn := e.newLimits[p.dag]
		in, limit := nodes(p), allowed(rec, now)
		if flagged[p.dag] || !okr || !okn || limit < 0 || len(in) <= limit || (rec != 0 && effective(rec) == effective(now)) {
			continue
		}
		flagged[p.dag] = true
		var was any = rec
		if rec == 0 {
			was = "default"
		}
		consider(p.pos, &Divergence{Kind: "schedule", Input: p.input, Recorded: p.rec, New: p.new,
			Reason: fmt.Sprintf("DAG %s had %d nodes in flight at once in %s (%s), more than max_concurrency %d allows (recorded %v, now %d)",
				p.dag, len(in), whose, strings.Join(in, ", "), limit, was, effective(now)),
			Fields: []Field{{Path: "max_concurrency", Recorded: was, New: effective(now)}, {Path: "in_flight", Recorded: nilIfEmpty(p.recNodes), New: nilIfEmpty(p.newNodes)}}})
	}
}

// nilIfEmpty keeps a side without a counterpart nil in a Field.
func nilIfEmpty(nodes []string) any {
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}
