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
	d.key = appendDAGNodeKey(d.key[:0], d.sid, d.dag, i)
	v, closer, err := d.snap.Get(d.key)
	if err == pebble.ErrNotFound {
		return nil, fmt.Errorf("dag %s/%s node %d: %w", d.sid, d.dag, i, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeNode(v)
}

// Nodes reads every node, in plan order.
func (d *DAGSnapshot) Nodes() ([]*Node, error) {
	var out []*Node
	p := dagNodesPrefix(d.sid, d.dag)
	err := scanPrefix(d.snap, p, func(_, v []byte) error {
		n, err := decodeNode(v)
		out = append(out, n)
		return err
	})
	return out, err
}

// Close releases the snapshot.
func (d *DAGSnapshot) Close() error { return d.snap.Close() }
