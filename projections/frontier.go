package projections

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// DefaultMaxConcurrency is how many nodes of a DAG run at once when its policy
// leaves max_concurrency at 0.
const DefaultMaxConcurrency = 4

// Frontier is what a DAG's scheduler reads at each step: the counts of nodes
// by state, the first ready nodes in dispatch order, the failed nodes and how
// far the layers have come. Its size depends on the policy's concurrency and
// on the failures, not on the DAG's size, so a step of a 10,000-node DAG reads
// as little as a step of a 10-node one; the fold keeps it up to date with each
// node event in time independent of the DAG's size too.
type Frontier struct {
	ID         string            `json:"id"`
	Session    string            `json:"session"`
	State      DAGState          `json:"state"`
	CreatedSeq uint64            `json:"created_seq"`
	CreatedAt  time.Time         `json:"created_at"`
	Nodes      int               `json:"nodes"`
	Counts     map[NodeState]int `json:"counts"`
	// Ready are the first ready nodes in dispatch order (by layer, then as the
	// plan lists them), as many as the policy's max_concurrency leaves room
	// for beside the dispatched and running nodes: what a step can dispatch.
	// (Ready nodes never have a dead dependency, so a step skips none of them.)
	// A wide DAG at full concurrency lists one or none, so a step decodes a
	// few bytes, not one entry per slot of max_concurrency.
	Ready []FrontierNode `json:"ready,omitempty"`
	// Failed are every failed node, in the same order: failed for good or
	// waiting for the scheduler to retry them.
	Failed []FrontierNode `json:"failed,omitempty"`
	// Blocked are the open (pending or ready) nodes with a dependency that
	// failed, was skipped or was cancelled, in the same order: what the
	// scheduler skips once it gives up on that dependency.
	Blocked []FrontierNode `json:"blocked,omitempty"`
	// DoneLayers counts the leading layers whose nodes are all done
	// (succeeded, failed, skipped or cancelled).
	DoneLayers int `json:"done_layers"`
	// Checkpointed counts the leading layers with a checkpoint event.
	Checkpointed int `json:"checkpointed"`
}

// FrontierNode names a node of a Frontier: Index is its place in the plan
// (what DAGSnapshot.Node reads).
type FrontierNode struct {
	ID      string `json:"id"`
	Index   int    `json:"index"`
	Attempt int    `json:"attempt,omitempty"`
}

func readyWindow(p schemas.Policy) int {
	if p.MaxConcurrency > 0 {
		return p.MaxConcurrency
	}
	return DefaultMaxConcurrency
}

// bitset is a set of small integers with a hint below which no bit is set, so
// that finding the first members of a set whose low end empties over time (a
// DAG's ready nodes as it advances) does not rescan the emptied words.
type bitset struct {
	w   []uint64
	low int // no bit is set in the words below low
}

func newBitset(n int) bitset { return bitset{w: make([]uint64, (n+63)/64)} }

func (b *bitset) set(i int, on bool) {
	if on {
		b.w[i/64] |= 1 << (i % 64)
		b.low = min(b.low, i/64)
	} else {
		b.w[i/64] &^= 1 << (i % 64)
	}
}

// each calls fn with the members in increasing order until fn returns false.
func (b *bitset) each(fn func(int) bool) {
	for b.low < len(b.w) && b.w[b.low] == 0 {
		b.low++
	}
	for wi := b.low; wi < len(b.w); wi++ {
		for w := b.w[wi]; w != 0; w &= w - 1 {
			if !fn(wi*64 + bits.TrailingZeros64(w)) {
				return
			}
		}
	}
}

// frontier is the fold's state behind a DAG's Frontier, derived from its
// nodes when the DAG is loaded (checkpointed excepted: it is read back) and
// kept current by moved.
type frontier struct {
	dependents   [][]int // node index -> the indexes of the nodes depending on it
	pos, atPos   []int   // node index -> dispatch position, and back
	ready        bitset  // by position
	failed       bitset  // by position
	blocked      bitset  // by position
	counts       map[NodeState]int
	layerOpen    []int // per layer: nodes not done
	doneLayers   int
	checkpointed int
}

func (o *dagObj) deriveFrontier() {
	d := o.d
	f := &o.f
	n := len(d.Nodes)
	f.dependents = make([][]int, n)
	for i, nd := range d.Nodes {
		for _, dep := range nd.DependsOn {
			if j, ok := o.indexOf(dep); ok {
				f.dependents[j] = append(f.dependents[j], i)
			}
		}
	}
	f.pos, f.atPos = make([]int, n), make([]int, 0, n)
	placed := make([]bool, n)
	for _, layer := range d.Layers {
		for _, id := range layer {
			if i, ok := o.indexOf(id); ok && !placed[i] {
				placed[i] = true
				f.pos[i] = len(f.atPos)
				f.atPos = append(f.atPos, i)
			}
		}
	}
	for i := range d.Nodes { // nodes of a rejected DAG have no layers
		if !placed[i] {
			f.pos[i] = len(f.atPos)
			f.atPos = append(f.atPos, i)
		}
	}
	f.ready, f.failed, f.blocked = newBitset(n), newBitset(n), newBitset(n)
	f.counts = map[NodeState]int{}
	layers := len(d.Layers)
	for _, nd := range d.Nodes {
		layers = max(layers, nd.Layer+1)
	}
	f.layerOpen = make([]int, layers)
	for i, nd := range d.Nodes {
		f.counts[nd.State]++
		f.ready.set(f.pos[i], nd.State == NodeReady)
		f.failed.set(f.pos[i], nd.State == NodeFailed)
		f.blocked.set(f.pos[i], o.isBlocked(nd))
		if !nd.State.Done() {
			f.layerOpen[nd.Layer]++
		}
	}
	f.doneLayers = 0
	f.advance()
}

// dead: a node in this state will not succeed unless retried.
func dead(s NodeState) bool {
	return s == NodeFailed || s == NodeSkipped || s == NodeCancelled
}

// isBlocked: n is open and a dependency of it is dead.
func (o *dagObj) isBlocked(n *Node) bool {
	if n.State != NodePending && n.State != NodeReady {
		return false
	}
	for _, dep := range n.DependsOn {
		if d, _ := o.node(dep); d != nil && dead(d.State) {
			return true
		}
	}
	return false
}

func (f *frontier) advance() {
	for f.doneLayers < len(f.layerOpen) && f.layerOpen[f.doneLayers] == 0 {
		f.doneLayers++
	}
}

// moved records that node i went from state from to its current state.
func (o *dagObj) moved(i int, from NodeState) {
	n, f := o.d.Nodes[i], &o.f
	to := n.State
	if from == to {
		return
	}
	if f.counts[from]--; f.counts[from] == 0 {
		delete(f.counts, from)
	}
	f.counts[to]++
	f.ready.set(f.pos[i], to == NodeReady)
	f.failed.set(f.pos[i], to == NodeFailed)
	f.blocked.set(f.pos[i], o.isBlocked(n))
	if dead(from) != dead(to) {
		for _, j := range f.dependents[i] {
			f.blocked.set(f.pos[j], o.isBlocked(o.d.Nodes[j]))
		}
	}
	switch {
	case from.Done() && !to.Done():
		f.layerOpen[n.Layer]++
		f.doneLayers = min(f.doneLayers, n.Layer)
	case !from.Done() && to.Done():
		f.layerOpen[n.Layer]--
		f.advance()
	}
}

// checkpointed records a checkpoint of layer l: the layers checkpointed so far
// are the leading ones (the Orchestrator checkpoints them in order).
func (o *dagObj) checkpointed(l int) {
	if l == o.f.checkpointed {
		o.f.checkpointed++
	}
}

func (o *dagObj) frontier() *Frontier {
	d, f := o.d, &o.f
	out := &Frontier{
		ID: d.ID, Session: d.Session, State: d.State, CreatedSeq: d.CreatedSeq, CreatedAt: d.CreatedAt,
		Nodes: len(d.Nodes), Counts: f.counts, DoneLayers: f.doneLayers, Checkpointed: f.checkpointed,
	}
	if room := readyWindow(d.Policy) - f.counts[NodeDispatched] - f.counts[NodeRunning]; room > 0 {
		f.ready.each(func(p int) bool {
			i := f.atPos[p]
			out.Ready = append(out.Ready, FrontierNode{ID: d.Nodes[i].ID, Index: i, Attempt: d.Nodes[i].Attempt})
			return len(out.Ready) < room
		})
	}
	all := func(b *bitset) (out []FrontierNode) {
		b.each(func(p int) bool {
			i := f.atPos[p]
			out = append(out, FrontierNode{ID: d.Nodes[i].ID, Index: i, Attempt: d.Nodes[i].Attempt})
			return true
		})
		return out
	}
	out.Failed, out.Blocked = all(&f.failed), all(&f.blocked)
	return out
}

// readCheckpointed reads back how many layers of a DAG are checkpointed.
func readCheckpointed(r pebble.Reader, sid, id string) (int, error) {
	fr, err := readFrontier(r, sid, id)
	if fr == nil {
		return 0, err
	}
	return fr.Checkpointed, nil
}

func readFrontier(r pebble.Reader, sid, id string) (*Frontier, error) {
	v, closer, err := r.Get(dagFrontierKey(sid, id))
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	fr := &Frontier{}
	if err := json.Unmarshal(v, fr); err != nil {
		return nil, fmt.Errorf("decode dag %s/%s frontier: %w", sid, id, err)
	}
	return fr, nil
}
