package projections

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// dagObj is a DAG in the fold's cache (see dagChunk).
type dagObj struct {
	h *DAG // the header: its Nodes and Layers are kept below
	// layers is how many layers h has; they list the nodes of order, each
	// in its node's layer.
	layers int
	// order are the nodes the layers list, in dispatch order: by layer, then
	// as the plan lists them.
	order []int32
	nodes []dagNode
	deps  []dagDep
	calls []dagCall
	strs  []byte
	index map[string]int // node id -> index, for DAGs of more than indexedNodes
	// dirty are the chunks to write; chunk 0 also when the header changed.
	dirty []int
	// header is h as JSON, kept from one write of chunk 0 to the next until
	// h changes: a live DAG writes chunk 0 at nearly every event of its
	// first nodes.
	header []byte
	f      frontier
}

// indexedNodes is how many nodes a DAG has at most to find one by a scan of
// its nodes rather than through a map: the map of 8 nodes was about 650
// bytes, and a rebuild of 100,000 sessions at once caches tens of
// thousands of DAGs.
const indexedNodes = 16

// newDAGObj makes d, nodes and layers included, a dagObj.
func newDAGObj(d *DAG) *dagObj {
	h := *d
	h.Nodes, h.Layers, h.Counts, h.CurrentLayer = nil, nil, nil, 0
	o := &dagObj{h: &h, layers: len(d.Layers), nodes: make([]dagNode, 0, len(d.Nodes)), calls: make([]dagCall, 0, len(d.Nodes))}
	// Room for the nodes' strings and, as they run, a call id, a summary
	// and evidence each: growing the buffer by doubling left a DAG's
	// previous buffers to the collector.
	size := 0
	for _, n := range d.Nodes {
		size += len(n.ID) + len(n.Agent) + len(n.Tool) + len(n.Prompt) + 64
		for _, dep := range n.DependsOn {
			size += len(dep)
		}
	}
	o.strs = make([]byte, 0, size)
	for _, n := range d.Nodes {
		o.addNode(n)
	}
	o.indexNodes()
	placed := make([]bool, len(o.nodes))
	for _, layer := range d.Layers {
		for _, id := range layer {
			if i, ok := o.indexOf(id); ok && !placed[i] {
				placed[i] = true
				o.order = append(o.order, int32(i))
			}
		}
	}
	o.prepare()
	return o
}

// indexNodes makes the index of a DAG of more than indexedNodes nodes.
func (o *dagObj) indexNodes() {
	o.index = nil
	if len(o.nodes) > indexedNodes {
		o.index = make(map[string]int, len(o.nodes))
		for i, n := range o.nodes {
			if id := o.str(n.id); !dup(o.index, id) {
				o.index[id] = i
			}
		}
	}
}

func dup(m map[string]int, k string) bool {
	_, ok := m[k]
	return ok
}

// prepare derives what the fold needs beside the nodes and the index: each
// dependency's node and the frontier.
func (o *dagObj) prepare() {
	for k := range o.deps {
		i, ok := o.indexOf(o.str(o.deps[k].id))
		if !ok {
			i = -1
		}
		o.deps[k].i = int32(i)
	}
	o.deriveFrontier()
}

// indexOf returns the index of the first node with the given id.
func (o *dagObj) indexOf(id string) (int, bool) {
	if o.index != nil {
		i, ok := o.index[id]
		return i, ok
	}
	for i := range o.nodes {
		if o.is(o.nodes[i].id, id) {
			return i, true
		}
	}
	return -1, false
}

// touchNode marks node i's chunk to be written.
func (o *dagObj) touchNode(i int) {
	if c := i / dagChunk; !slices.Contains(o.dirty, c) {
		o.dirty = append(o.dirty, c)
	}
}

// touchHeader marks the header (in chunk 0's value) changed.
func (o *dagObj) touchHeader() {
	o.header = nil
	o.touchNode(0)
}

// touchAll marks every chunk to be written.
func (o *dagObj) touchAll() {
	o.dirty = o.dirty[:0]
	for c := 0; c == 0 || c*dagChunk < len(o.nodes); c++ {
		o.dirty = append(o.dirty, c)
	}
}

func (o *dagObj) encode(b *pebble.Batch, k []byte, s *scratch) error {
	for _, c := range o.dirty {
		if c == 0 {
			if o.header == nil {
				h, err := s.marshal(o.h)
				if err != nil {
					return err
				}
				o.header = slices.Clone(h)
			}
			s.val = o.appendValue(s.val[:0], o.header)
			if err := b.Set(k, s.val, nil); err != nil {
				return err
			}
			continue
		}
		s.val = o.appendChunk(s.val[:0], c)
		s.key = appendDAGChunkKey(s.key[:0], o.h.Session, o.h.ID, c)
		if err := b.Set(s.key, s.val, nil); err != nil {
			return err
		}
	}
	o.dirty = o.dirty[:0]
	v, err := s.marshal(o.frontier())
	if err != nil {
		return err
	}
	s.key = appendDAGFrontierKey(s.key[:0], o.h.Session, o.h.ID)
	return b.Set(s.key, v, nil)
}

// loadDAG and storeDAG build the key in the tx's buffer: the fold looks a DAG
// up at every node event, and the cache copies a key only for a new entry.
func loadDAG(t *tx, sid, id string) (*dagObj, error) {
	t.kbuf = appendDAGKey(t.kbuf[:0], sid, id)
	k := t.kbuf
	if e, ok := t.cache.get(k); ok {
		if e.obj == nil {
			return nil, nil
		}
		return e.obj.(*dagObj), nil
	}
	if t.knownAbsent(k) {
		return nil, nil // see missing
	}
	o, err := readDAGObj(t.db, sid, id)
	if err != nil {
		return nil, err
	}
	if o == nil {
		t.cache.put(k, nil, false)
		return nil, nil
	}
	o.indexNodes()
	o.prepare()
	t.cache.put(k, o, false)
	return o, nil
}

func (t *tx) storeDAG(o *dagObj) {
	t.kbuf = appendDAGKey(t.kbuf[:0], o.h.Session, o.h.ID)
	t.cache.put(t.kbuf, o, true)
}

// running lists the running DAGs by session, for cancel signals.
type running struct {
	BySession map[string][]string `json:"by_session"`
}

func (r *running) add(sid, dag string) {
	if r.BySession == nil {
		r.BySession = map[string][]string{}
	}
	r.BySession[sid] = append(r.BySession[sid], dag)
}

func (r *running) remove(sid, dag string) {
	l := slices.DeleteFunc(r.BySession[sid], func(s string) bool { return s == dag })
	if len(l) == 0 {
		delete(r.BySession, sid)
	} else {
		r.BySession[sid] = l
	}
}

func loadRunning(t *tx) (*running, error) {
	r, err := load[running](t, dagRunningKey)
	if r == nil && err == nil {
		r = &running{}
	}
	return r, err
}

// finishDAG ends a running DAG in state s: nodes not done are cancelled.
func finishDAG(t *tx, o *dagObj, s DAGState, ev *event, why string) error {
	d := o.h
	ts := ev.env.Timestamp
	d.State, d.FinishedAt = s, timePtr(ts)
	o.cancelOpen(why, ts)
	o.touchHeader()
	t.storeDAG(o)
	r, err := loadRunning(t)
	if err != nil {
		return err
	}
	r.remove(d.Session, d.ID)
	store(t, dagRunningKey, r)
	return nil
}

// cancelOpen cancels the nodes not done.
func (o *dagObj) cancelOpen(why string, ts time.Time) {
	for i := range o.nodes {
		n := &o.nodes[i]
		if from := n.state; !from.done() {
			n.state = stateCancelled
			o.setStr(&n.skipReason, why)
			n.setTime(finishedAt, &ts)
			o.moved(i, from)
			o.touchNode(i)
		}
	}
}

// promote makes ready each pending dependent of node i whose dependencies all
// succeeded: only i's dependents can have become ready.
func promote(o *dagObj, i int) {
	for _, j := range o.f.dependentsOf(i) {
		if n := &o.nodes[j]; n.state == statePending && depsSucceeded(o, int(j)) {
			n.state = stateReady
			o.moved(int(j), statePending)
			o.touchNode(int(j))
		}
	}
}

// depsSucceeded: every dependency of node i is a node that succeeded.
func depsSucceeded(o *dagObj, i int) bool {
	for _, dep := range o.nodeDeps(i) {
		if dep.i < 0 || o.nodes[dep.i].state != stateSucceeded {
			return false
		}
	}
	return true
}

// waitingOn lists node i's dependencies that have not succeeded, with states.
func waitingOn(o *dagObj, i int) string {
	var w []string
	for _, dep := range o.nodeDeps(i) {
		if dep.i >= 0 && o.nodes[dep.i].state != stateSucceeded {
			w = append(w, o.str(dep.id)+" "+o.nodes[dep.i].state.String())
		}
	}
	if len(w) == 0 {
		return ""
	}
	return " (waiting for " + strings.Join(w, ", ") + ")"
}

// callOf returns the index in o.calls of node i's call id, or -1.
func (o *dagObj) callOf(i int, id string) int {
	for k, c := range o.callsOf(i) {
		if o.is(c.id, id) {
			return k
		}
	}
	return -1
}

// applyDAGs folds DAG events. A DAG is keyed by its session and id; events
// naming a DAG or node the session does not have are refused, as are node
// events the node's state does not allow (see the node rules below) and events
// for a DAG that has finished. A cancel signal cancels the nodes not done of
// the running DAGs it covers; the DAG itself ends with the Orchestrator's
// workflow_complete (outcome cancelled).
func applyDAGs(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypeDAGExecute:
		return dagExecute(t, ev)
	case schemas.TypeSessionFork:
		return forkDAGs(t, ev)
	case schemas.TypeDAGRejected:
		p, err := payloadOf[schemas.DAGRejected](t, DAGs, ev)
		if p == nil {
			return err
		}
		o, err := loadDAG(t, env.SessionID, p.DAGID)
		switch {
		case err != nil:
			return err
		case o == nil:
			return t.reject(DAGs, ev, "dag %s is unknown in session %s", p.DAGID, env.SessionID)
		case o.h.State == DAGRejected:
			for _, pr := range p.Problems {
				if !slices.Contains(o.h.Problems, pr) {
					o.h.Problems = append(o.h.Problems, pr)
				}
			}
			o.touchHeader()
			t.storeDAG(o)
			return nil
		case o.h.State != DAGRunning:
			return t.reject(DAGs, ev, "dag %s is %s: it can no longer be rejected", p.DAGID, o.h.State)
		}
		o.h.Problems = append(o.h.Problems, p.Problems...)
		return finishDAG(t, o, DAGRejected, ev, "dag rejected")
	case schemas.TypeDAGStatus:
		p, err := payloadOf[schemas.DAGStatus](t, DAGs, ev)
		if p == nil {
			return err
		}
		o, err := runningDAG(t, ev, p.DAGID, false)
		if o == nil {
			return err
		}
		o.h.LastStatus = p
		o.touchHeader()
		t.storeDAG(o)
		return nil
	case schemas.TypeWorkflowComplete:
		p, err := payloadOf[schemas.WorkflowComplete](t, DAGs, ev)
		if p == nil {
			return err
		}
		o, err := runningDAG(t, ev, p.DAGID, false)
		if o == nil {
			return err
		}
		var s DAGState
		switch p.Outcome {
		case schemas.OutcomeSucceeded:
			s = DAGSucceeded
		case schemas.OutcomeFailed:
			s = DAGFailed
		case schemas.OutcomeCancelled:
			s = DAGCancelled
		default:
			return t.reject(DAGs, ev, "outcome %q: want succeeded, failed or cancelled", p.Outcome)
		}
		o.h.Outcome = &Outcome{Outcome: p.Outcome, Summary: p.Summary, Succeeded: p.Succeeded, Failed: p.Failed, Skipped: p.Skipped, Duration: p.Duration, Seq: ev.seq}
		return finishDAG(t, o, s, ev, "workflow ended: "+p.Outcome)
	case schemas.TypeSignal:
		p, err := payloadOf[schemas.Signal](t, DAGs, ev)
		if p == nil || p.Action != schemas.SignalCancel {
			return err
		}
		r, err := loadRunning(t)
		if err != nil {
			return err
		}
		var targets [][2]string
		for _, sid := range sortedKeys(r.BySession) {
			if p.Scope == schemas.ScopeAll || sid == env.SessionID {
				for _, dag := range r.BySession[sid] {
					targets = append(targets, [2]string{sid, dag})
				}
			}
		}
		for _, tg := range targets {
			o, err := loadDAG(t, tg[0], tg[1])
			if err != nil {
				return err
			}
			if o == nil {
				continue
			}
			why := fmt.Sprintf("cancelled by signal at seq %d", ev.seq)
			if p.Reason != "" {
				why += ": " + p.Reason
			}
			o.cancelOpen(why, env.Timestamp)
			t.storeDAG(o)
		}
		return nil
	case schemas.TypeCheckpoint:
		// The checkpoints projection checks checkpoints; the frontier only
		// counts them.
		p, err := payloadOf[schemas.Checkpoint](t, DAGs, ev)
		if p == nil {
			return err
		}
		o, err := loadDAG(t, env.SessionID, p.DAGID)
		if o == nil {
			return err
		}
		o.checkpointed(p.Layer)
		o.touchNode(0) // chunk 0's value holds the layers checkpointed
		t.storeDAG(o)
		return nil
	case schemas.TypeTaskDispatch:
		p, err := payloadOf[schemas.TaskDispatch](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			switch {
			case n.state != stateReady:
				return fmt.Sprintf("node %s is %s: a dispatch needs a ready node%s", o.str(n.id), n.state, waitingOn(o, i))
			case p.Attempt < 1:
				return fmt.Sprintf("attempt %d: attempts count from 1", p.Attempt)
			case p.Attempt < int(n.attempt):
				return fmt.Sprintf("attempt %d is stale: node %s is at attempt %d", p.Attempt, o.str(n.id), n.attempt)
			}
			n.state, n.attempt = stateDispatched, int32(p.Attempt)
			n.setTime(dispatchedAt, &env.Timestamp)
			n.setTime(startedAt, nil)
			n.setTime(finishedAt, nil)
			return ""
		})
	case schemas.TypeToolCall:
		p, err := payloadOf[schemas.ToolCall](t, DAGs, ev)
		if p == nil || p.DAGID == "" {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			if why := activeNode(o, n, "a tool call", p.Attempt); why != "" {
				return why
			}
			c := o.callOf(i, p.CallID)
			if c >= 0 && o.calls[c].resultSeq != 0 {
				return fmt.Sprintf("call %s already has its result (seq %d): it must not run again", p.CallID, o.calls[c].resultSeq)
			}
			if n.state == stateDispatched {
				n.state = stateRunning
				n.setTime(startedAt, &env.Timestamp)
			}
			if c >= 0 {
				o.calls[c].seq = ev.seq // an interrupted call started again
			} else {
				o.addCall(i, dagCall{id: o.intern(p.CallID), tool: o.internLike(p.Tool, n.tool), attempt: int32(p.Attempt), seq: ev.seq})
			}
			return ""
		})
	case schemas.TypeToolResult:
		p, err := payloadOf[schemas.ToolResult](t, DAGs, ev)
		if p == nil || p.DAGID == "" {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, true, func(o *dagObj, i int, n *dagNode) string {
			c := o.callOf(i, p.CallID)
			if c < 0 {
				c = o.addCall(i, dagCall{id: o.intern(p.CallID), tool: o.internLike(p.Tool, n.tool), attempt: int32(p.Attempt)})
			} else if o.calls[c].resultSeq != 0 {
				return fmt.Sprintf("result of call %s already recorded at seq %d", p.CallID, o.calls[c].resultSeq)
			}
			o.calls[c].resultSeq, o.calls[c].ok = ev.seq, p.OK
			return ""
		})
	case schemas.TypeTaskComplete:
		p, err := payloadOf[schemas.TaskComplete](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			if why := activeNode(o, n, "completion", p.Attempt); why != "" {
				return why
			}
			n.state = stateSucceeded
			n.setTime(finishedAt, &env.Timestamp)
			n.flags |= nodeResult
			o.setStr(&n.summary, p.Summary)
			o.setStr(&n.evidence, p.Evidence)
			if c := o.callOf(i, p.CallID); c >= 0 {
				n.callID = o.calls[c].id
			} else {
				o.setStr(&n.callID, p.CallID)
			}
			n.resultSeq = ev.seq
			n.help, n.lastError = str{}, str{}
			n.setFlag(nodeRetryable, false)
			promote(o, i)
			return ""
		})
	case schemas.TypeTaskFailed:
		p, err := payloadOf[schemas.TaskFailed](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			if why := activeNode(o, n, "failure", p.Attempt); why != "" {
				return why
			}
			n.state = stateFailed
			n.setTime(finishedAt, &env.Timestamp)
			o.setStr(&n.lastError, p.Error)
			n.setFlag(nodeRetryable, p.Retryable)
			return ""
		})
	case schemas.TypeTaskHelp:
		p, err := payloadOf[schemas.TaskHelp](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			if why := activeNode(o, n, "a help request", p.Attempt); why != "" {
				return why
			}
			o.setStr(&n.help, p.Reason)
			return ""
		})
	case schemas.TypeNodeRetry:
		p, err := payloadOf[schemas.NodeRetry](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			switch {
			case n.state != stateFailed && n.state != stateDispatched && n.state != stateRunning:
				return fmt.Sprintf("node %s is %s: only a failed, dispatched or running node can be retried", o.str(n.id), n.state)
			case p.Attempt <= int(n.attempt):
				return fmt.Sprintf("retry attempt %d must come after attempt %d", p.Attempt, n.attempt)
			}
			n.state, n.attempt = statePending, int32(p.Attempt)
			if depsSucceeded(o, i) {
				n.state = stateReady
			}
			n.help = str{}
			for k := range n.times {
				n.setTime(k, nil)
			}
			return ""
		})
	case schemas.TypeNodeSkipped:
		p, err := payloadOf[schemas.NodeSkipped](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, i int, n *dagNode) string {
			if n.state != statePending && n.state != stateReady {
				return fmt.Sprintf("node %s is %s: only a pending or ready node can be skipped", o.str(n.id), n.state)
			}
			n.state = stateSkipped
			o.setStr(&n.skipReason, p.Reason)
			n.setTime(finishedAt, &env.Timestamp)
			return ""
		})
	}
	return nil
}

// activeNode checks a node can take an event of a running attempt: it is
// dispatched or running, and attempt (0: unspecified) is its current one.
func activeNode(o *dagObj, n *dagNode, what string, attempt int) string {
	switch {
	case n.state != stateDispatched && n.state != stateRunning:
		return fmt.Sprintf("node %s is %s: %s needs a dispatched or running node", o.str(n.id), n.state, what)
	case attempt != 0 && attempt != int(n.attempt):
		return fmt.Sprintf("attempt %d is stale: node %s is at attempt %d", attempt, o.str(n.id), n.attempt)
	}
	return ""
}

// runningDAG loads the event's DAG, refusing the event if the session has no
// such DAG or (unless finishedOK) the DAG has finished. nil means refused.
func runningDAG(t *tx, ev *event, id string, finishedOK bool) (*dagObj, error) {
	sid := ev.env.SessionID
	o, err := loadDAG(t, sid, id)
	switch {
	case err != nil:
		return nil, err
	case o == nil:
		return nil, t.reject(DAGs, ev, "dag %s is unknown in session %s", id, sid)
	case o.h.State == DAGRejected:
		return nil, t.reject(DAGs, ev, "dag %s was rejected: %s", id, strings.Join(o.h.Problems, "; "))
	case o.h.State != DAGRunning && !finishedOK:
		return nil, t.reject(DAGs, ev, "dag %s is %s: it takes no more events", id, o.h.State)
	}
	return o, nil
}

// nodeEvent applies fn to a node of a running DAG; fn returns why it refuses
// the event, or "" after changing the node.
func nodeEvent(t *tx, ev *event, dag, node string, finishedOK bool, fn func(o *dagObj, i int, n *dagNode) string) error {
	o, err := runningDAG(t, ev, dag, finishedOK)
	if o == nil {
		return err
	}
	i, ok := o.indexOf(node)
	if !ok {
		return t.reject(DAGs, ev, "dag %s has no node %q", dag, node)
	}
	n := &o.nodes[i]
	from := n.state
	if why := fn(o, i, n); why != "" {
		return t.reject(DAGs, ev, "%s", why)
	}
	o.moved(i, from)
	o.touchNode(i)
	t.storeDAG(o)
	return nil
}

func dagExecute(t *tx, ev *event) error {
	env := ev.env
	p, err := payloadOf[schemas.DAGExecute](t, DAGs, ev)
	if p == nil {
		return err
	}
	spec := p.DAG
	if !schemas.ValidName(spec.ID) {
		return t.reject(DAGs, ev, "dag id %q is not a name", spec.ID)
	}
	old, err := loadDAG(t, env.SessionID, spec.ID)
	if err != nil {
		return err
	}
	if old != nil {
		return t.reject(DAGs, ev, "dag %s already exists in session %s (submitted at seq %d)", spec.ID, env.SessionID, old.h.CreatedSeq)
	}
	layers, layerOf, problems := Plan(spec)
	d := &DAG{
		ID: spec.ID, Session: env.SessionID, Name: spec.Name, Prompt: spec.Prompt, Policy: spec.Policy,
		State: DAGRunning, Layers: layers, SubmittedBy: env.Source, Correlation: env.CorrelationID,
		CreatedSeq: ev.seq, CreatedAt: env.Timestamp,
	}
	for _, sn := range spec.Nodes {
		n := &Node{ID: sn.ID, Agent: sn.Agent, Tool: sn.Tool, Prompt: sn.Prompt, DependsOn: sn.DependsOn, Layer: layerOf[sn.ID], State: NodePending}
		if len(problems) == 0 && len(sn.DependsOn) == 0 {
			n.State = NodeReady
		}
		d.Nodes = append(d.Nodes, n)
	}
	if len(problems) > 0 {
		d.State, d.Problems, d.FinishedAt = DAGRejected, problems, timePtr(env.Timestamp)
	}
	o := newDAGObj(d)
	o.touchAll()
	if err := t.set(dagIDKey(spec.ID, env.SessionID), nil); err != nil {
		return err
	}
	if len(problems) > 0 {
		t.storeDAG(o)
		return t.reject(DAGs, ev, "invalid dag %s: %s", spec.ID, strings.Join(problems, "; "))
	}
	t.storeDAG(o)
	r, err := loadRunning(t)
	if err != nil {
		return err
	}
	r.add(env.SessionID, spec.ID)
	store(t, dagRunningKey, r)
	return nil
}

// summarize fills in the fields of a DAG computed when read: node counts and
// the current layer.
func summarize(d *DAG) {
	d.Counts = map[NodeState]int{}
	for _, n := range d.Nodes {
		d.Counts[n.State]++
	}
	// The current layer is the first with a node not done: one pass over the
	// nodes, not a lookup of each layer's nodes (quadratic in a long chain).
	d.CurrentLayer = len(d.Layers)
	for _, n := range d.Nodes {
		if !n.State.Done() && n.Layer < d.CurrentLayer {
			d.CurrentLayer = n.Layer
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
