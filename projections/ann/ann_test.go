package ann

import (
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// small is a generated set small enough for a unit test, and its index.
func small(t *testing.T, probes int) (*Generated, *Index) {
	t.Helper()
	g := Generate(6000, 48, 40, 7)
	ix := New(48, Options{Probes: probes, Seed: 3})
	ix.Build(g.IDs, g.Vecs, g.Labels)
	return g, ix
}

func meanRecall(g *Generated, ix *Index, keep func(string) bool) float64 {
	ids, vecs := g.IDs, g.Vecs
	if keep != nil {
		ids, vecs = nil, nil
		for i, l := range g.Labels {
			if keep(l) {
				ids, vecs = append(ids, g.IDs[i]), append(vecs, g.Vecs[i])
			}
		}
	}
	sum := 0.0
	for _, q := range g.Queries {
		sum += Recall(ix.Search(q, 10, keep), Exact(q, vecs, ids, 10))
	}
	return sum / float64(len(g.Queries))
}

// Probing every list is the exact scan; probing some finds nearly all of the
// true neighbours while reading a share of the vectors; probing one finds
// fewer. (48 dimensions keep the test quick; the neighbourhoods are blurrier
// than at 768, see `sylk bench vector`.)
func TestRecallAgainstTheExactScan(t *testing.T) {
	g, ix := small(t, 0)
	if n := len(ix.lists); n != 60 {
		t.Fatalf("%d lists for 6000 vectors, want 60", n)
	}
	ix.opts.Probes = len(ix.lists)
	if r := meanRecall(g, ix, nil); r != 1 {
		t.Fatalf("every list probed: recall %.3f, want 1", r)
	}
	ix.opts.Probes = 18
	few := meanRecall(g, ix, nil)
	if few < 0.95 {
		t.Fatalf("18 of 60 lists: recall %.3f, want at least 0.95", few)
	}
	ix.opts.Probes = 1
	if one := meanRecall(g, ix, nil); one >= few {
		t.Fatalf("one list: recall %.3f, not below 18 lists' %.3f", one, few)
	}
}

// A filter keeps only the vectors whose label it accepts; a label too rare
// for the probed lists to hold k of is scanned exactly.
func TestFilteredSearch(t *testing.T) {
	g, ix := small(t, 9)
	keep := func(l string) bool { return l == "d1" }
	for _, q := range g.Queries[:5] {
		for _, h := range ix.Search(q, 10, keep) {
			i, _ := strconv.Atoi(h.ID)
			if g.Labels[i] != "d1" {
				t.Fatalf("hit %s has label %s", h.ID, g.Labels[i])
			}
		}
	}
	if r := meanRecall(g, ix, keep); r < 0.95 {
		t.Fatalf("filtered recall %.3f", r)
	}
	for i := range 12 {
		ix.Add("rare"+strconv.Itoa(i), "rare", g.Vecs[i*100])
	}
	rare := func(l string) bool { return l == "rare" }
	for _, q := range g.Queries[:5] {
		if hits := ix.Search(q, 10, rare); len(hits) != 10 {
			t.Fatalf("a rare label: %d hits, want 10 of its 12", len(hits))
		}
	}
	if hits := ix.Search(g.Queries[0], 10, func(string) bool { return false }); hits != nil {
		t.Fatalf("a filter keeping nothing found %v", hits)
	}
}

// A removed vector is never found; a vector added after training is found,
// and replacing a vector moves it.
func TestAddAndRemove(t *testing.T) {
	g, ix := small(t, 6)
	q := g.Queries[0]
	first := ix.Search(q, 1, nil)[0].ID
	ix.Remove(first)
	if got := ix.Search(q, 10, nil); len(got) != 10 || got[0].ID == first || ix.Len() != 5999 {
		t.Fatalf("after removing %s: %v (%d held)", first, got, ix.Len())
	}
	ix.Add("new", "d0", q)
	if got := ix.Search(q, 1, nil); got[0].ID != "new" || got[0].Sim < 0.999 {
		t.Fatalf("the query itself, added: %v", got)
	}
	ix.Add("new", "d0", g.Queries[1])
	if got := ix.Search(q, 1, nil); got[0].ID == "new" {
		t.Fatalf("a replaced vector is found where it was: %v", got)
	}
	if ix.Len() != 6000 {
		t.Fatalf("%d held, want 6000", ix.Len())
	}
}
