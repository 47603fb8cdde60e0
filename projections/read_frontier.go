package projections

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// DAGSnapshot reads one DAG's frontier and the nodes it names from a single
// snapshot of the store, so what a scheduler reads in one step is consistent.
type DAGSnapshot struct {
	Frontier *Frontier

	snap     *pebble.Snapshot
	sid, dag string
	key      []byte
}

// OpenDAG opens a snapshot of the DAG id of session; ErrNotFound when the
// session has no such DAG. Close it when done.
func (s *Store) OpenDAG(ctx context.Context, session, id string) (*DAGSnapshot, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	fr, err := readFrontier(snap, session, id)
	if err == nil && fr == nil {
		err = notFound("dag", id)
	}
	if err != nil {
		snap.Close()
		return nil, err
	}
	return &DAGSnapshot{Frontier: fr, snap: snap, sid: session, dag: id}, nil
}

// Node reads the node at index i of the plan.
func (d *DAGSnapshot) Node(i int) (*Node, error) {
	missing := func() error { return fmt.Errorf("dag %s/%s node %d: %w", d.sid, d.dag, i, ErrNotFound) }
	if i < 0 {
		return nil, missing()
	}
	c := i / dagChunk
	if c == 0 {
		d.key = appendDAGKey(d.key[:0], d.sid, d.dag)
	} else {
		d.key = appendDAGChunkKey(d.key[:0], d.sid, d.dag, c)
	}
	v, closer, err := d.snap.Get(d.key)
	if err == pebble.ErrNotFound {
		return nil, missing()
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	// Only the nodes up to i are decoded, and not the header.
	o := &dagObj{nodes: make([]dagNode, 0, dagChunk), strs: make([]byte, 0, len(v))}
	r := &dagReader{recordReader: recordReader{b: v}, o: o}
	if c == 0 {
		r.header(false)
	}
	r.chunk(i - c*dagChunk + 1)
	switch {
	case r.err != nil:
		return nil, fmt.Errorf("decode dag %s/%s node %d: %w", d.sid, d.dag, i, r.err)
	case i-c*dagChunk >= len(r.o.nodes):
		return nil, missing()
	}
	return r.o.node(i - c*dagChunk), nil
}

// Nodes reads every node, in plan order.
func (d *DAGSnapshot) Nodes() ([]*Node, error) {
	o, err := readDAGObj(d.snap, d.sid, d.dag)
	if o == nil {
		return nil, err
	}
	return o.dag().Nodes, nil
}

// Close releases the snapshot.
func (d *DAGSnapshot) Close() error { return d.snap.Close() }
