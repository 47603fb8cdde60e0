package projections

import (
	"testing"

	"github.com/sylk/sylk/projections/ann"
)

// From annMin vectors a search goes through the IVF index and finds what
// the exact scan finds; below it the index is dropped.
func TestVectorIndexUsesTheIVFIndexWhenLarge(t *testing.T) {
	g := ann.Generate(3000, 48, 20, 5)
	v := &vectorIndex{annMin: 2000, width: 48, vecs: map[string][]float32{}}
	for i, id := range g.IDs {
		v.vecs[id] = g.Vecs[i]
	}
	v.index()
	if v.ann == nil || v.ann.Len() != 3000 || v.trained != 3000 {
		t.Fatalf("3000 vectors, threshold 2000: index %v", v.ann)
	}
	sum := 0.0
	for _, q := range g.Queries {
		got, err := v.search(q, 10)
		if err != nil {
			t.Fatal(err)
		}
		exact := scanNearest(v.vecs, q, 10)
		a, e := make([]ann.Hit, len(got)), make([]ann.Hit, len(exact))
		for i := range got {
			a[i] = ann.Hit{ID: got[i].path}
		}
		for i := range exact {
			e[i] = ann.Hit{ID: exact[i].path}
		}
		sum += ann.Recall(a, e)
	}
	if r := sum / float64(len(g.Queries)); r < 0.95 {
		t.Fatalf("recall through the index %.3f", r)
	}
	for _, id := range g.IDs[:1500] {
		delete(v.vecs, id)
	}
	v.index()
	if v.ann != nil {
		t.Fatal("1500 vectors, threshold 2000: the index is kept")
	}
}
