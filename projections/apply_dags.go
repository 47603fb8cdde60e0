package projections

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// dagObj is a DAG in the fold's cache: the header and the nodes are separate
// keys, so an event that changes one node writes one small value.
type dagObj struct {
	d           *DAG
	index       map[string]int // node id -> index, for DAGs of more than indexedNodes
	headerDirty bool
	dirtyNodes  []int
	f           frontier
}

// indexedNodes is how many nodes a DAG has at most to find one by a scan of
// its nodes rather than through a map: the map of 8 nodes was about 650
// bytes, and a rebuild of 100,000 sessions at once caches tens of
// thousands of DAGs.
const indexedNodes = 16

func newDAGObj(d *DAG) *dagObj {
	o := &dagObj{d: d}
	if len(d.Nodes) > indexedNodes {
		o.index = make(map[string]int, len(d.Nodes))
		for i, n := range d.Nodes {
			if _, dup := o.index[n.ID]; !dup {
				o.index[n.ID] = i
			}
		}
	}
	o.deriveFrontier()
	return o
}

// indexOf returns the index of the first node with the given id.
func (o *dagObj) indexOf(id string) (int, bool) {
	if o.index != nil {
		i, ok := o.index[id]
		return i, ok
	}
	for i, n := range o.d.Nodes {
		if n.ID == id {
			return i, true
		}
	}
	return -1, false
}

func (o *dagObj) node(id string) (*Node, int) {
	i, ok := o.indexOf(id)
	if !ok {
		return nil, -1
	}
	return o.d.Nodes[i], i
}

func (o *dagObj) touchNode(i int) {
	if !slices.Contains(o.dirtyNodes, i) {
		o.dirtyNodes = append(o.dirtyNodes, i)
	}
}

func (o *dagObj) encode(b *pebble.Batch, k []byte, s *scratch) error {
	if o.headerDirty {
		h := *o.d
		h.Nodes, h.Counts, h.CurrentLayer = nil, nil, 0
		v, err := s.marshal(&h)
		if err != nil {
			return err
		}
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		o.headerDirty = false
	}
	for _, i := range o.dirtyNodes {
		s.val = appendNodeJSON(s.val[:0], o.d.Nodes[i])
		s.key = appendDAGNodeKey(s.key[:0], o.d.Session, o.d.ID, i)
		if err := b.Set(s.key, s.val, nil); err != nil {
			return err
		}
	}
	o.dirtyNodes = o.dirtyNodes[:0]
	v, err := s.marshal(o.frontier())
	if err != nil {
		return err
	}
	s.key = appendDAGFrontierKey(s.key[:0], o.d.Session, o.d.ID)
	return b.Set(s.key, v, nil)
}

// readDAG reads a DAG's header and nodes from r; nil when there is none.
func readDAG(r pebble.Reader, sid, id string) (*DAG, error) {
	v, closer, err := r.Get(dagKey(sid, id))
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := &DAG{}
	err = json.Unmarshal(v, d)
	closer.Close()
	if err != nil {
		return nil, fmt.Errorf("decode dag %s/%s: %w", sid, id, err)
	}
	p := dagNodesPrefix(sid, id)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		n, err := decodeNode(it.Value())
		if err != nil {
			return nil, fmt.Errorf("dag %s/%s: %w", sid, id, err)
		}
		d.Nodes = append(d.Nodes, n)
	}
	return d, it.Error()
}

func decodeNode(v []byte) (*Node, error) {
	n := &Node{}
	if !decodeNodeJSON(v, n) {
		*n = Node{}
		if err := json.Unmarshal(v, n); err != nil {
			return nil, fmt.Errorf("decode node: %w", err)
		}
	}
	return n, nil
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
	d, err := readDAG(t.db, sid, id)
	if err != nil {
		return nil, err
	}
	if d == nil {
		t.cache.put(k, nil, false)
		return nil, nil
	}
	o := newDAGObj(d)
	if o.f.checkpointed, err = readCheckpointed(t.db, sid, id); err != nil {
		return nil, err
	}
	t.cache.put(k, o, false)
	return o, nil
}

func (t *tx) storeDAG(o *dagObj) {
	t.kbuf = appendDAGKey(t.kbuf[:0], o.d.Session, o.d.ID)
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
	d := o.d
	ts := ev.env.Timestamp
	d.State, d.FinishedAt = s, timePtr(ts)
	o.cancelOpen(why, ts)
	o.headerDirty = true
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
	for i, n := range o.d.Nodes {
		if from := n.State; !from.Done() {
			n.State, n.SkipReason, n.FinishedAt = NodeCancelled, why, timePtr(ts)
			o.moved(i, from)
			o.touchNode(i)
		}
	}
}

// promote makes ready each pending dependent of node i whose dependencies all
// succeeded: only i's dependents can have become ready.
func promote(o *dagObj, i int) {
	for _, j := range o.f.dependents[i] {
		if n := o.d.Nodes[j]; n.State == NodePending && depsSucceeded(o, n) {
			n.State = NodeReady
			o.moved(j, NodePending)
			o.touchNode(j)
		}
	}
}

func depsSucceeded(o *dagObj, n *Node) bool {
	for _, dep := range n.DependsOn {
		if d, _ := o.node(dep); d == nil || d.State != NodeSucceeded {
			return false
		}
	}
	return true
}

// waitingOn lists a node's dependencies that have not succeeded, with states.
func waitingOn(o *dagObj, n *Node) string {
	var w []string
	for _, dep := range n.DependsOn {
		if d, _ := o.node(dep); d != nil && d.State != NodeSucceeded {
			w = append(w, dep+" "+string(d.State))
		}
	}
	if len(w) == 0 {
		return ""
	}
	return " (waiting for " + strings.Join(w, ", ") + ")"
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
		case o.d.State == DAGRejected:
			for _, pr := range p.Problems {
				if !slices.Contains(o.d.Problems, pr) {
					o.d.Problems = append(o.d.Problems, pr)
				}
			}
			o.headerDirty = true
			t.storeDAG(o)
			return nil
		case o.d.State != DAGRunning:
			return t.reject(DAGs, ev, "dag %s is %s: it can no longer be rejected", p.DAGID, o.d.State)
		}
		o.d.Problems = append(o.d.Problems, p.Problems...)
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
		o.d.LastStatus = p
		o.headerDirty = true
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
		o.d.Outcome = &Outcome{Outcome: p.Outcome, Summary: p.Summary, Succeeded: p.Succeeded, Failed: p.Failed, Skipped: p.Skipped, Duration: p.Duration, Seq: ev.seq}
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
		t.storeDAG(o)
		return nil
	case schemas.TypeTaskDispatch:
		p, err := payloadOf[schemas.TaskDispatch](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			switch {
			case n.State != NodeReady:
				return fmt.Sprintf("node %s is %s: a dispatch needs a ready node%s", n.ID, n.State, waitingOn(o, n))
			case p.Attempt < 1:
				return fmt.Sprintf("attempt %d: attempts count from 1", p.Attempt)
			case p.Attempt < n.Attempt:
				return fmt.Sprintf("attempt %d is stale: node %s is at attempt %d", p.Attempt, n.ID, n.Attempt)
			}
			n.State, n.Attempt = NodeDispatched, p.Attempt
			n.DispatchedAt, n.StartedAt, n.FinishedAt = timePtr(env.Timestamp), nil, nil
			return ""
		})
	case schemas.TypeToolCall:
		p, err := payloadOf[schemas.ToolCall](t, DAGs, ev)
		if p == nil || p.DAGID == "" {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			if why := activeNode(n, "a tool call", p.Attempt); why != "" {
				return why
			}
			i := slices.IndexFunc(n.Calls, func(c Call) bool { return c.ID == p.CallID })
			if i >= 0 && n.Calls[i].ResultSeq != 0 {
				return fmt.Sprintf("call %s already has its result (seq %d): it must not run again", p.CallID, n.Calls[i].ResultSeq)
			}
			if n.State == NodeDispatched {
				n.State, n.StartedAt = NodeRunning, timePtr(env.Timestamp)
			}
			if i >= 0 {
				n.Calls[i].Seq = ev.seq // an interrupted call started again
			} else {
				n.Calls = append(n.Calls, Call{ID: p.CallID, Tool: p.Tool, Attempt: p.Attempt, Seq: ev.seq})
			}
			return ""
		})
	case schemas.TypeToolResult:
		p, err := payloadOf[schemas.ToolResult](t, DAGs, ev)
		if p == nil || p.DAGID == "" {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, true, func(o *dagObj, n *Node) string {
			i := slices.IndexFunc(n.Calls, func(c Call) bool { return c.ID == p.CallID })
			if i < 0 {
				n.Calls = append(n.Calls, Call{ID: p.CallID, Tool: p.Tool, Attempt: p.Attempt})
				i = len(n.Calls) - 1
			} else if n.Calls[i].ResultSeq != 0 {
				return fmt.Sprintf("result of call %s already recorded at seq %d", p.CallID, n.Calls[i].ResultSeq)
			}
			n.Calls[i].ResultSeq, n.Calls[i].OK = ev.seq, p.OK
			return ""
		})
	case schemas.TypeTaskComplete:
		p, err := payloadOf[schemas.TaskComplete](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			if why := activeNode(n, "completion", p.Attempt); why != "" {
				return why
			}
			n.State, n.FinishedAt = NodeSucceeded, timePtr(env.Timestamp)
			n.Result = &NodeResult{Summary: p.Summary, Evidence: p.Evidence, CallID: p.CallID, Seq: ev.seq}
			n.Help, n.LastError, n.Retryable = "", "", false
			i, _ := o.indexOf(n.ID)
			promote(o, i)
			return ""
		})
	case schemas.TypeTaskFailed:
		p, err := payloadOf[schemas.TaskFailed](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			if why := activeNode(n, "failure", p.Attempt); why != "" {
				return why
			}
			n.State, n.FinishedAt = NodeFailed, timePtr(env.Timestamp)
			n.LastError, n.Retryable = p.Error, p.Retryable
			return ""
		})
	case schemas.TypeTaskHelp:
		p, err := payloadOf[schemas.TaskHelp](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			if why := activeNode(n, "a help request", p.Attempt); why != "" {
				return why
			}
			n.Help = p.Reason
			return ""
		})
	case schemas.TypeNodeRetry:
		p, err := payloadOf[schemas.NodeRetry](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			switch {
			case n.State != NodeFailed && n.State != NodeDispatched && n.State != NodeRunning:
				return fmt.Sprintf("node %s is %s: only a failed, dispatched or running node can be retried", n.ID, n.State)
			case p.Attempt <= n.Attempt:
				return fmt.Sprintf("retry attempt %d must come after attempt %d", p.Attempt, n.Attempt)
			}
			n.State, n.Attempt = NodePending, p.Attempt
			if depsSucceeded(o, n) {
				n.State = NodeReady
			}
			n.Help, n.DispatchedAt, n.StartedAt, n.FinishedAt = "", nil, nil, nil
			return ""
		})
	case schemas.TypeNodeSkipped:
		p, err := payloadOf[schemas.NodeSkipped](t, DAGs, ev)
		if p == nil {
			return err
		}
		return nodeEvent(t, ev, p.DAGID, p.NodeID, false, func(o *dagObj, n *Node) string {
			if n.State != NodePending && n.State != NodeReady {
				return fmt.Sprintf("node %s is %s: only a pending or ready node can be skipped", n.ID, n.State)
			}
			n.State, n.SkipReason, n.FinishedAt = NodeSkipped, p.Reason, timePtr(env.Timestamp)
			return ""
		})
	}
	return nil
}

// activeNode checks a node can take an event of a running attempt: it is
// dispatched or running, and attempt (0: unspecified) is its current one.
func activeNode(n *Node, what string, attempt int) string {
	switch {
	case n.State != NodeDispatched && n.State != NodeRunning:
		return fmt.Sprintf("node %s is %s: %s needs a dispatched or running node", n.ID, n.State, what)
	case attempt != 0 && attempt != n.Attempt:
		return fmt.Sprintf("attempt %d is stale: node %s is at attempt %d", attempt, n.ID, n.Attempt)
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
	case o.d.State == DAGRejected:
		return nil, t.reject(DAGs, ev, "dag %s was rejected: %s", id, strings.Join(o.d.Problems, "; "))
	case o.d.State != DAGRunning && !finishedOK:
		return nil, t.reject(DAGs, ev, "dag %s is %s: it takes no more events", id, o.d.State)
	}
	return o, nil
}

// nodeEvent applies fn to a node of a running DAG; fn returns why it refuses
// the event, or "" after changing the node.
func nodeEvent(t *tx, ev *event, dag, node string, finishedOK bool, fn func(*dagObj, *Node) string) error {
	o, err := runningDAG(t, ev, dag, finishedOK)
	if o == nil {
		return err
	}
	n, i := o.node(node)
	if n == nil {
		return t.reject(DAGs, ev, "dag %s has no node %q", dag, node)
	}
	from := n.State
	if why := fn(o, n); why != "" {
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
		return t.reject(DAGs, ev, "dag %s already exists in session %s (submitted at seq %d)", spec.ID, env.SessionID, old.d.CreatedSeq)
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
	o := newDAGObj(d)
	o.headerDirty = true
	for i := range d.Nodes {
		o.dirtyNodes = append(o.dirtyNodes, i) // all new: no need to look for duplicates
	}
	if err := t.set(dagIDKey(spec.ID, env.SessionID), nil); err != nil {
		return err
	}
	if len(problems) > 0 {
		d.State, d.Problems, d.FinishedAt = DAGRejected, problems, timePtr(env.Timestamp)
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
