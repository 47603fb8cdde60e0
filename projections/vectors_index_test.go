package projections

import (
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/projections/ann"
)

// From annMin vectors a search goes through the IVF index and finds what
// the exact scan finds; below it the index is dropped. The index is trained
// in the background: a search while it trains scans exactly and does not
// wait, and the vectors changed meanwhile are in the index it puts in use.
func TestVectorIndexUsesTheIVFIndexWhenLarge(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := ann.Generate(3000, 48, 20, 5)
	release := make(chan struct{})
	var builds sync.WaitGroup
	v := &vectorIndex{annMin: 2000, width: 48, vecs: map[string][]float32{}, builds: &builds, trainHook: func() { <-release }}
	for i, id := range g.IDs[:2990] {
		v.vecs[id] = g.Vecs[i]
	}
	v.mu.Lock()
	v.index()
	if v.ann != nil || !v.training {
		t.Fatalf("2990 vectors, threshold 2000: training %v, index in use %v", v.training, v.ann)
	}
	// The training is held: this search would hang if it waited for it.
	got, err := v.search(g.Queries[0], 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if exact := scanNearest(v.vecs, g.Queries[0], 10, nil); len(got) != 10 || got[0] != exact[0] || got[9] != exact[9] {
		t.Fatalf("a search while training is not the exact scan: %v vs %v", got, exact)
	}
	// Changes while it trains: ten vectors added, the first ten removed.
	for i, id := range g.IDs[2990:] {
		v.vecs[id] = g.Vecs[2990+i]
		v.touched(id)
	}
	for _, id := range g.IDs[:10] {
		delete(v.vecs, id)
		v.touched(id)
	}
	v.index() // a training in flight is not started again
	v.mu.Unlock()
	close(release)
	builds.Wait()

	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ann == nil || v.ann.Len() != 2990 || v.trained != 2990 || v.training {
		t.Fatalf("after the training: index %v, trained on %d, training %v", v.ann, v.trained, v.training)
	}
	if hits := v.ann.Search(ann.Unit(g.Vecs[2999]), 1, nil); len(hits) != 1 || hits[0].ID != g.IDs[2999] {
		t.Fatalf("a vector added during the training is not found: %v", hits)
	}
	if hits := v.ann.Search(ann.Unit(g.Vecs[0]), 1, nil); len(hits) == 1 && hits[0].ID == g.IDs[0] {
		t.Fatalf("a vector removed during the training is still there")
	}
	sum := 0.0
	for _, q := range g.Queries {
		got, err := v.search(q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact := scanNearest(v.vecs, q, 10, nil)
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

// A filter is applied inside the search, through the IVF index: one that
// keeps 1% of 100,000 vectors still returns k of them, those an exact scan
// of the kept vectors finds (recall at least 0.95), where the nearest 5k of
// all the vectors filtered afterwards would have fallen short.
func TestVectorIndexFiltersInsideTheSearch(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n, k = 100000, 10
	g := ann.Generate(n, 32, 40, 11)
	var builds sync.WaitGroup
	v := &vectorIndex{width: 32, vecs: make(map[string][]float32, n), labels: make(map[string]string, n), builds: &builds}
	for i, id := range g.IDs {
		v.vecs[id], v.labels[id] = g.Vecs[i], "code/function"
		if i%100 == 0 {
			v.labels[id] = "history/decision"
		}
	}
	v.mu.Lock()
	v.index()
	v.mu.Unlock()
	builds.Wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ann == nil {
		t.Fatal("100,000 vectors: the search does not go through the IVF index")
	}
	decisions := func(label string) bool { return label == "history/decision" }
	sum, short := 0.0, 0
	for _, q := range g.Queries {
		got, err := v.search(q, k, decisions)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != k {
			t.Fatalf("a filter keeping 1,000 vectors: %d hits, want %d", len(got), k)
		}
		a := make([]ann.Hit, len(got))
		for i, h := range got {
			if !decisions(v.labels[h.path]) {
				t.Fatalf("hit %s is labelled %q, outside the filter", h.path, v.labels[h.path])
			}
			a[i] = ann.Hit{ID: h.path}
		}
		exact := scanNearest(v.vecs, q, k, func(id string) bool { return decisions(v.labels[id]) })
		e := make([]ann.Hit, len(exact))
		for i, h := range exact {
			e[i] = ann.Hit{ID: h.path}
		}
		sum += ann.Recall(a, e)
		after, err := v.search(q, 5*k, nil)
		if err != nil {
			t.Fatal(err)
		}
		kept := 0
		for _, h := range after {
			if decisions(v.labels[h.path]) {
				kept++
			}
		}
		if kept < k {
			short++
		}
	}
	if r := sum / float64(len(g.Queries)); r < 0.95 {
		t.Fatalf("filtered recall@%d through the index %.3f, want at least 0.95", k, r)
	}
	if short == 0 {
		t.Fatal("filtering the nearest 5k afterwards never fell short: the test does not tell the two apart")
	}
}
