package projections

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A DAG in the fold's cache holds no pointer per node: its nodes are one
// slice of fixed-size structs, their dependencies and tool calls one slice
// each, and every string of them an offset into one byte buffer, so the
// collector, which a rebuild keeps busy, marks a handful of objects per DAG
// instead of a dozen per node. (Each node was 3-7 KB of pointers, strings and
// time values; the 20,000 DAGs of a 1M-event rebuild were a tenth of its live
// heap.)
//
// Stored, a DAG is one value under its key: the header (JSON, its nodes
// left out), the layers checkpointed, and its first dagChunk nodes in a
// binary record, each node with its place in the dispatch order. A DAG of more nodes keeps the others in
// values of dagChunk nodes each (dags/n/<sid>\0<dag>\0<chunk>), so a live
// event on one node of a 10,000-node DAG rewrites one chunk, not the DAG,
// and reading a DAG of up to dagChunk nodes is one point read. (Chunks of
// 64 nodes, about 4 KB, made each node event of a 10,000-node chain write
// 20 times what a node key did, and the chain's overhead per node grew by a
// fifth.)
const dagChunk = 16

// str is a string of a DAG's nodes: its place in dagObj.strs.
type str struct{ off, n uint32 }

// dagNode is a Node in a dagObj.
type dagNode struct {
	id, agent, tool, prompt     str
	lastError, help, skipReason str
	// The result's, when flags has nodeResult.
	summary, evidence, callID str
	resultSeq                 uint64
	// dispatched, started and finished at, in Unix ns, each when flags has
	// its bit (event times are UTC).
	times       [3]int64
	deps, ndeps uint32 // its dependencies: dagObj.deps[deps:deps+ndeps]
	// Its tool calls are a list through dagObj.calls: the first and the
	// last's indexes plus one (0: none).
	firstCall, lastCall int32
	layer, attempt      int32
	state               nodeState
	flags               uint8
}

// dagNode flags.
const (
	nodeResult = 1 << iota
	nodeRetryable
	nodeTime0 // dispatched at; started at and finished at are the next bits
)

const (
	dispatchedAt = iota
	startedAt
	finishedAt
)

// nodeState is a NodeState as its index in NodeStates.
type nodeState uint8

func (s nodeState) String() string { return string(NodeStates[s]) }

const (
	statePending nodeState = iota
	stateReady
	stateDispatched
	stateRunning
	stateSucceeded
	stateFailed
	stateSkipped
	stateCancelled
	nodeStateCount
)

func (s nodeState) done() bool { return s >= stateSucceeded }

// dead: a node in this state will not succeed unless retried.
func (s nodeState) dead() bool { return s >= stateFailed }

func nodeStateOf(s NodeState) (nodeState, bool) {
	for i, v := range NodeStates {
		if v == s {
			return nodeState(i), true
		}
	}
	return 0, false
}

// dagDep is a dependency of a node: its id, and its index (-1: the DAG has
// no such node, which only a rejected DAG's nodes name).
type dagDep struct {
	id str
	i  int32
}

// dagCall is a tool call of a node.
type dagCall struct {
	id, tool       str
	seq, resultSeq uint64
	attempt        int32
	next           int32 // the node's next call's index plus one (0: none)
	ok             bool
}

// addCall appends c to node i's calls and returns its index.
func (o *dagObj) addCall(i int, c dagCall) int {
	o.calls = append(o.calls, c)
	k, n := len(o.calls), &o.nodes[i]
	if n.lastCall != 0 {
		o.calls[n.lastCall-1].next = int32(k)
	} else {
		n.firstCall = int32(k)
	}
	n.lastCall = int32(k)
	return k - 1
}

// callsOf yields node i's calls in order, with their indexes.
func (o *dagObj) callsOf(i int) iter.Seq2[int, *dagCall] {
	return func(yield func(int, *dagCall) bool) {
		for k := o.nodes[i].firstCall; k != 0; k = o.calls[k-1].next {
			if !yield(int(k-1), &o.calls[k-1]) {
				return
			}
		}
	}
}

func (o *dagObj) str(s str) string { return string(o.strs[s.off : s.off+s.n]) }

// is reports whether s is v, without a copy.
func (o *dagObj) is(s str, v string) bool { return string(o.strs[s.off:s.off+s.n]) == v }

func (o *dagObj) intern(v string) str {
	if v == "" {
		return str{}
	}
	s := str{uint32(len(o.strs)), uint32(len(v))}
	o.strs = append(o.strs, v...)
	return s
}

// internLike is intern, giving like when it is v already: a call's tool is
// most often its node's, a result's call one of the node's calls.
func (o *dagObj) internLike(v string, like str) str {
	if o.is(like, v) {
		return like
	}
	return o.intern(v)
}

// setStr sets *s to v, adding v to the buffer unless *s is v already. The
// buffer keeps the strings replaced until the DAG is read back.
func (o *dagObj) setStr(s *str, v string) {
	if !o.is(*s, v) {
		*s = o.intern(v)
	}
}

func (n *dagNode) setTime(k int, t *time.Time) {
	if t == nil {
		n.flags &^= nodeTime0 << k
		return
	}
	n.flags |= nodeTime0 << k
	n.times[k] = t.UnixNano()
}

func (n *dagNode) time(k int) *time.Time {
	if n.flags&(nodeTime0<<k) == 0 {
		return nil
	}
	t := time.Unix(0, n.times[k]).UTC()
	return &t
}

func (n *dagNode) setFlag(f uint8, on bool) {
	if on {
		n.flags |= f
	} else {
		n.flags &^= f
	}
}

// nodeDeps returns node i's dependencies.
func (o *dagObj) nodeDeps(i int) []dagDep {
	n := &o.nodes[i]
	return o.deps[n.deps : n.deps+n.ndeps]
}

// addNode appends n, with its strings, dependencies and calls.
func (o *dagObj) addNode(n *Node) {
	st, _ := nodeStateOf(n.State)
	dn := dagNode{
		id: o.intern(n.ID), agent: o.intern(n.Agent), tool: o.intern(n.Tool), prompt: o.intern(n.Prompt),
		lastError: o.intern(n.LastError), help: o.intern(n.Help), skipReason: o.intern(n.SkipReason),
		deps: uint32(len(o.deps)), ndeps: uint32(len(n.DependsOn)),
		layer: int32(n.Layer), attempt: int32(n.Attempt), state: st,
	}
	for _, d := range n.DependsOn {
		o.deps = append(o.deps, dagDep{id: o.intern(d), i: -1})
	}
	if r := n.Result; r != nil {
		dn.flags |= nodeResult
		dn.summary, dn.evidence, dn.callID, dn.resultSeq = o.intern(r.Summary), o.intern(r.Evidence), o.intern(r.CallID), r.Seq
	}
	dn.setFlag(nodeRetryable, n.Retryable)
	dn.setTime(dispatchedAt, n.DispatchedAt)
	dn.setTime(startedAt, n.StartedAt)
	dn.setTime(finishedAt, n.FinishedAt)
	o.nodes = append(o.nodes, dn)
	for _, c := range n.Calls {
		o.addCall(len(o.nodes)-1, dagCall{attempt: int32(c.Attempt), id: o.intern(c.ID), tool: o.intern(c.Tool), seq: c.Seq, resultSeq: c.ResultSeq, ok: c.OK})
	}
}

// node returns node i as a Node.
func (o *dagObj) node(i int) *Node {
	n := &o.nodes[i]
	out := &Node{
		ID: o.str(n.id), Agent: o.str(n.agent), Tool: o.str(n.tool), Prompt: o.str(n.prompt),
		Layer: int(n.layer), State: NodeStates[n.state], Attempt: int(n.attempt),
		LastError: o.str(n.lastError), Retryable: n.flags&nodeRetryable != 0, Help: o.str(n.help), SkipReason: o.str(n.skipReason),
		DispatchedAt: n.time(dispatchedAt), StartedAt: n.time(startedAt), FinishedAt: n.time(finishedAt),
	}
	if n.ndeps > 0 {
		out.DependsOn = make([]string, 0, n.ndeps)
		for _, d := range o.nodeDeps(i) {
			out.DependsOn = append(out.DependsOn, o.str(d.id))
		}
	}
	if n.flags&nodeResult != 0 {
		out.Result = &NodeResult{Summary: o.str(n.summary), Evidence: o.str(n.evidence), CallID: o.str(n.callID), Seq: n.resultSeq}
	}
	for _, c := range o.callsOf(i) {
		out.Calls = append(out.Calls, Call{ID: o.str(c.id), Tool: o.str(c.tool), Attempt: int(c.attempt), Seq: c.seq, ResultSeq: c.resultSeq, OK: c.ok})
	}
	return out
}

// dag returns the DAG with its nodes, as readers see it.
func (o *dagObj) dag() *DAG {
	d := *o.h
	if o.layers > 0 {
		d.Layers = make([][]string, o.layers)
		for _, i := range o.order {
			l := o.nodes[i].layer
			d.Layers[l] = append(d.Layers[l], o.str(o.nodes[i].id))
		}
	}
	d.Nodes = make([]*Node, len(o.nodes))
	for i := range o.nodes {
		d.Nodes[i] = o.node(i)
	}
	return &d
}

// appendValue appends the DAG's value: its header as JSON, how many layers
// are checkpointed, its number of nodes and layers, how many nodes its
// layers list, and its first chunk of nodes.
func (o *dagObj) appendValue(b, header []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(header)))
	b = append(b, header...)
	b = binary.AppendUvarint(b, uint64(o.f.checkpointed))
	b = binary.AppendUvarint(b, uint64(len(o.nodes)))
	b = binary.AppendUvarint(b, uint64(o.layers))
	b = binary.AppendUvarint(b, uint64(len(o.order)))
	return o.appendChunk(b, 0)
}

// appendChunk appends the nodes of chunk c, each with its place in the
// dispatch order plus one (0: its layers do not list it), so that the value
// the header is in does not grow with the DAG.
func (o *dagObj) appendChunk(b []byte, c int) []byte {
	bytes := func(s str) []byte {
		b = binary.AppendUvarint(b, uint64(s.n))
		return append(b, o.strs[s.off:s.off+s.n]...)
	}
	for i := c * dagChunk; i < min(len(o.nodes), (c+1)*dagChunk); i++ {
		n := &o.nodes[i]
		for _, s := range [...]str{n.id, n.agent, n.tool, n.prompt, n.lastError, n.help, n.skipReason} {
			b = bytes(s)
		}
		b = binary.AppendUvarint(b, uint64(n.ndeps))
		for _, d := range o.nodeDeps(i) {
			b = bytes(d.id)
		}
		place := 0
		if p := int(o.f.pos[i]); p < len(o.order) {
			place = p + 1
		}
		b = binary.AppendUvarint(b, uint64(place))
		b = binary.AppendVarint(b, int64(n.layer))
		b = binary.AppendVarint(b, int64(n.attempt))
		b = append(b, byte(n.state), n.flags)
		if n.flags&nodeResult != 0 {
			b = bytes(n.summary)
			b = bytes(n.evidence)
			b = bytes(n.callID)
			b = binary.AppendUvarint(b, n.resultSeq)
		}
		for k, t := range n.times {
			if n.flags&(nodeTime0<<k) != 0 {
				b = binary.AppendVarint(b, t)
			}
		}
		calls := 0
		for range o.callsOf(i) {
			calls++
		}
		b = binary.AppendUvarint(b, uint64(calls))
		for _, cl := range o.callsOf(i) {
			b = bytes(cl.id)
			b = bytes(cl.tool)
			b = binary.AppendVarint(b, int64(cl.attempt))
			b = binary.AppendUvarint(b, cl.seq)
			b = binary.AppendUvarint(b, cl.resultSeq)
			ok := byte(0)
			if cl.ok {
				ok = 1
			}
			b = append(b, ok)
		}
	}
	return b
}

// dagReader decodes a DAG's values into a dagObj.
type dagReader struct {
	recordReader
	o *dagObj
}

func (d *dagReader) str() str {
	b := d.bytes()
	s := str{uint32(len(d.o.strs)), uint32(len(b))}
	d.o.strs = append(d.o.strs, b...)
	return s
}

// header reads what appendValue writes before the first chunk and returns
// the number of nodes. For a read of the whole DAG it decodes the header's
// JSON and makes room for every node and the dispatch order (the nodes fill
// it in); a read of one node (whole false) skips them.
func (d *dagReader) header(whole bool) int {
	h := d.bytes()
	if d.err == nil && whole {
		d.o.h = &DAG{}
		if err := json.Unmarshal(h, d.o.h); err != nil {
			d.fail(err)
		}
	}
	d.o.f.checkpointed = int(d.uvarint())
	n := d.uvarint()
	d.o.layers = int(d.uvarint())
	placed := d.uvarint()
	if d.err == nil && placed > n {
		d.fail(errTruncated)
	}
	if d.err != nil {
		return 0
	}
	if whole {
		d.o.nodes = make([]dagNode, 0, min(n, 1<<16))
		d.o.order = make([]int32, placed)
		for p := range d.o.order {
			d.o.order[p] = -1
		}
	}
	return int(n)
}

// chunk reads a value's nodes, up to dagChunk and total in all, and
// reports whether the value ends there.
func (d *dagReader) chunk(total int) bool {
	for k := 0; k < dagChunk && len(d.o.nodes) < total && len(d.b) > 0 && d.err == nil; k++ {
		o := d.o
		i := int32(len(o.nodes))
		n := dagNode{id: d.str(), agent: d.str(), tool: d.str(), prompt: d.str(), lastError: d.str(), help: d.str(), skipReason: d.str()}
		n.deps, n.ndeps = uint32(len(o.deps)), uint32(d.uvarint())
		for range n.ndeps {
			if d.err != nil {
				break
			}
			o.deps = append(o.deps, dagDep{id: d.str(), i: -1})
		}
		if p := d.uvarint(); p > 0 && o.order != nil {
			if p > uint64(len(o.order)) || o.order[p-1] != -1 {
				d.fail(fmt.Errorf("node %d: place %d", i, p))
			} else {
				o.order[p-1] = i
			}
		}
		n.layer, n.attempt = int32(d.varint()), int32(d.varint())
		n.state, n.flags = nodeState(d.byte()), d.byte()
		if n.state >= nodeStateCount {
			d.fail(fmt.Errorf("node state %d", n.state))
		}
		if n.flags&nodeResult != 0 {
			n.summary, n.evidence, n.callID, n.resultSeq = d.str(), d.str(), d.str(), d.uvarint()
		}
		for k := range n.times {
			if n.flags&(nodeTime0<<k) != 0 {
				n.times[k] = d.varint()
			}
		}
		o.nodes = append(o.nodes, n)
		calls := d.uvarint()
		for range calls {
			if d.err != nil {
				break
			}
			o.addCall(int(i), dagCall{id: d.str(), tool: d.str(), attempt: int32(d.varint()), seq: d.uvarint(), resultSeq: d.uvarint(), ok: d.byte() != 0})
		}
	}
	return len(d.b) == 0
}

// readDAGObj reads a DAG's values from r, its frontier not derived; nil
// when there is none.
func readDAGObj(r pebble.Reader, sid, id string) (*dagObj, error) {
	v, closer, err := r.Get(dagKey(sid, id))
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := &dagReader{recordReader: recordReader{b: v}, o: &dagObj{strs: make([]byte, 0, len(v))}}
	n := d.header(true)
	whole := d.chunk(n)
	closer.Close()
	if d.err == nil && len(d.o.nodes) < n {
		p := dagNodesPrefix(sid, id)
		err = scanPrefix(r, p, func(_, v []byte) error {
			d.b = v
			if !d.chunk(n) {
				whole = false
			}
			return d.err
		})
		d.fail(err)
	}
	if !whole {
		d.fail(errors.New("bytes after the nodes"))
	}
	if d.err == nil && slices.Contains(d.o.order, -1) {
		d.fail(errors.New("a place in the dispatch order without its node"))
	}
	if d.err == nil && len(d.o.nodes) < n {
		d.fail(fmt.Errorf("%d of %d nodes", len(d.o.nodes), n))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode dag %s/%s: %w", sid, id, d.err)
	}
	return d.o, nil
}

// readDAG reads a DAG as readers see it; nil when there is none.
func readDAG(r pebble.Reader, sid, id string) (*DAG, error) {
	o, err := readDAGObj(r, sid, id)
	if o == nil {
		return nil, err
	}
	return o.dag(), nil
}

// The sizes of a DAG's parts, for memBytes.
var (
	dagObjBytes  = int(reflect.TypeFor[dagObj]().Size() + reflect.TypeFor[DAG]().Size())
	dagNodeBytes = int(reflect.TypeFor[dagNode]().Size())
	dagDepBytes  = int(reflect.TypeFor[dagDep]().Size())
	dagCallBytes = int(reflect.TypeFor[dagCall]().Size())
)

// dagIndexBytes is what a node costs in a DAG's index (see indexNodes): a
// map slot, its string header and hash.
const dagIndexBytes = 48

// memBytes is what the DAG holds in memory (see sizer): its slices at their
// capacity, the frontier included, and the header's JSON it keeps.
func (o *dagObj) memBytes() int {
	f := &o.f
	int32s := cap(o.order) + cap(f.dependents) + cap(f.depStart) + cap(f.pos) + cap(f.atPos) + cap(f.layerOpen)
	words := cap(f.ready.w) + cap(f.failed.w) + cap(f.blocked.w) + cap(o.dirty)
	return dagObjBytes + cap(o.header) + cap(o.strs) + 4*int32s + 8*words +
		cap(o.nodes)*dagNodeBytes + cap(o.deps)*dagDepBytes + cap(o.calls)*dagCallBytes + len(o.index)*dagIndexBytes
}
