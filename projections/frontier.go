package projections

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
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
// kept current by moved. It holds no pointer but its slices'.
type frontier struct {
	// dependents[depStart[i]:depStart[i+1]] are the nodes depending on node i.
	dependents, depStart []int32
	pos, atPos           []int32 // node index -> dispatch position, and back
	ready                bitset  // by position
	failed               bitset  // by position
	blocked              bitset  // by position
	counts               [nodeStateCount]int
	layerOpen            []int32 // per layer: nodes not done
	doneLayers           int
	checkpointed         int
}

func (f *frontier) dependentsOf(i int) []int32 { return f.dependents[f.depStart[i]:f.depStart[i+1]] }

func (o *dagObj) deriveFrontier() {
	f := &o.f
	n := len(o.nodes)
	f.depStart = make([]int32, n+1)
	for _, d := range o.deps {
		if d.i >= 0 {
			f.depStart[d.i+1]++
		}
	}
	for i := range n {
		f.depStart[i+1] += f.depStart[i]
	}
	f.dependents = make([]int32, f.depStart[n])
	next := slices.Clone(f.depStart[:n])
	for i := range o.nodes {
		for _, d := range o.nodeDeps(i) {
			if d.i >= 0 {
				f.dependents[next[d.i]] = int32(i)
				next[d.i]++
			}
		}
	}
	f.pos, f.atPos = make([]int32, n), make([]int32, 0, n)
	placed := make([]bool, n)
	for _, i := range o.order {
		placed[i] = true
		f.pos[i] = int32(len(f.atPos))
		f.atPos = append(f.atPos, i)
	}
	for i := range o.nodes { // nodes of a rejected DAG have no layers
		if !placed[i] {
			f.pos[i] = int32(len(f.atPos))
			f.atPos = append(f.atPos, int32(i))
		}
	}
	words := (n + 63) / 64
	w := make([]uint64, 3*words)
	f.ready, f.failed, f.blocked = bitset{w: w[:words:words]}, bitset{w: w[words : 2*words : 2*words]}, bitset{w: w[2*words:]}
	f.counts = [nodeStateCount]int{}
	layers := o.layers
	for _, nd := range o.nodes {
		layers = max(layers, int(nd.layer)+1)
	}
	f.layerOpen = make([]int32, layers)
	for i, nd := range o.nodes {
		f.counts[nd.state]++
		f.ready.set(int(f.pos[i]), nd.state == stateReady)
		f.failed.set(int(f.pos[i]), nd.state == stateFailed)
		f.blocked.set(int(f.pos[i]), o.isBlocked(i))
		if !nd.state.done() {
			f.layerOpen[nd.layer]++
		}
	}
	f.doneLayers = 0
	f.advance()
}

// isBlocked: node i is open and a dependency of it is dead.
func (o *dagObj) isBlocked(i int) bool {
	if s := o.nodes[i].state; s != statePending && s != stateReady {
		return false
	}
	for _, dep := range o.nodeDeps(i) {
		if dep.i >= 0 && o.nodes[dep.i].state.dead() {
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
func (o *dagObj) moved(i int, from nodeState) {
	n, f := &o.nodes[i], &o.f
	to := n.state
	if from == to {
		return
	}
	f.counts[from]--
	f.counts[to]++
	p := int(f.pos[i])
	f.ready.set(p, to == stateReady)
	f.failed.set(p, to == stateFailed)
	f.blocked.set(p, o.isBlocked(i))
	if from.dead() != to.dead() {
		for _, j := range f.dependentsOf(i) {
			f.blocked.set(int(f.pos[j]), o.isBlocked(int(j)))
		}
	}
	switch {
	case from.done() && !to.done():
		f.layerOpen[n.layer]++
		f.doneLayers = min(f.doneLayers, int(n.layer))
	case !from.done() && to.done():
		f.layerOpen[n.layer]--
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
	d, f := o.h, &o.f
	out := &Frontier{
		ID: d.ID, Session: d.Session, State: d.State, CreatedSeq: d.CreatedSeq, CreatedAt: d.CreatedAt,
		Nodes: len(o.nodes), Counts: map[NodeState]int{}, DoneLayers: f.doneLayers, Checkpointed: f.checkpointed,
	}
	for s, c := range f.counts {
		if c != 0 {
			out.Counts[NodeStates[s]] = c
		}
	}
	at := func(p int) FrontierNode {
		i := int(f.atPos[p])
		return FrontierNode{ID: o.str(o.nodes[i].id), Index: i, Attempt: int(o.nodes[i].attempt)}
	}
	if room := readyWindow(d.Policy) - f.counts[stateDispatched] - f.counts[stateRunning]; room > 0 {
		f.ready.each(func(p int) bool {
			out.Ready = append(out.Ready, at(p))
			return len(out.Ready) < room
		})
	}
	all := func(b *bitset) (out []FrontierNode) {
		b.each(func(p int) bool {
			out = append(out, at(p))
			return true
		})
		return out
	}
	out.Failed, out.Blocked = all(&f.failed), all(&f.blocked)
	return out
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
