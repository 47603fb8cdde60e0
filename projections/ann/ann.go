// Package ann is approximate nearest-neighbour search over unit vectors by
// cosine similarity: an inverted file (IVF). The vectors are partitioned
// into lists by the nearest of a set of centroids found by k-means; a
// search compares the query with every centroid, then scans only the lists
// of the nearest few (Probes), so it reads a small share of the vectors.
// Recall is traded against speed by Probes; a filter (by a label each
// vector carries, e.g. a domain and a type) is applied while the lists are
// scanned, probing more lists for a filter that keeps fewer vectors (one
// that keeps few is answered by an exact scan of those alone).
//
// The index is derived state: it is built from vectors kept elsewhere (the
// vectors projection) and can be dropped and built again at any time.
package ann

import (
	"cmp"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
)

// Defaults of Options.
const (
	// DefaultPerList is the mean list size Lists aims at.
	DefaultPerList = 100
	// DefaultProbes is how many lists a search scans.
	DefaultProbes = 24
	// DefaultIterations of k-means at each level.
	DefaultIterations = 8
	// trainPerCentroid bounds the sample each k-means runs on.
	trainPerCentroid = 32
)

// Options configure an Index.
type Options struct {
	// Lists is the number of lists (0: n/DefaultPerList for the n vectors
	// trained on, at least 1).
	Lists int
	// Probes is how many lists a search scans (0: DefaultProbes).
	Probes int
	// Iterations of k-means (0: DefaultIterations).
	Iterations int
	// Seed makes training deterministic.
	Seed uint64
}

// Hit is a vector found and its cosine similarity to the query.
type Hit struct {
	ID  string
	Sim float32
}

// Index is an IVF index of unit vectors of one dimension. It is not safe for
// concurrent use.
type Index struct {
	dim       int
	opts      Options
	centroids []float32 // len(lists)*dim
	lists     []list
	where     map[string]slot
	labels    []string // label id -> label
	labelIDs  map[string]uint16
	counts    []int // vectors per label id
}

// list is one inverted list: its vectors contiguous.
type list struct {
	ids    []string
	labels []uint16
	vecs   []float32
}

type slot struct{ list, pos int }

// New returns an empty index of dim-dimensional vectors.
func New(dim int, opts Options) *Index {
	if opts.Probes <= 0 {
		opts.Probes = DefaultProbes
	}
	if opts.Iterations <= 0 {
		opts.Iterations = DefaultIterations
	}
	return &Index{dim: dim, opts: opts, where: map[string]slot{}, labelIDs: map[string]uint16{}}
}

// Lists is the number of lists; Probes how many a search scans.
func (ix *Index) Lists() int  { return len(ix.lists) }
func (ix *Index) Probes() int { return ix.opts.Probes }

// Len is the number of vectors held.
func (ix *Index) Len() int { return len(ix.where) }

// Dim is the vectors' dimension.
func (ix *Index) Dim() int { return ix.dim }

// Trained says whether the index has centroids (Build or Train ran).
func (ix *Index) Trained() bool { return len(ix.lists) > 0 }

// Build trains the index on vecs and adds them all, each with its id and
// label (labels may be nil). vecs must be unit vectors of the index's
// dimension.
func (ix *Index) Build(ids []string, vecs [][]float32, labels []string) {
	assign := ix.train(vecs)
	for i, id := range ids {
		l := ""
		if labels != nil {
			l = labels[i]
		}
		ix.put(id, vecs[i], l, assign[i])
	}
}

// Train finds the lists' centroids from vecs and empties the index.
func (ix *Index) Train(vecs [][]float32) { ix.train(vecs) }

// train finds the centroids in two levels of spherical k-means (about
// √Lists coarse clusters, then each cut into its share of the lists), so it
// reads each vector a few dozen times rather than Lists times, empties the
// index, and returns the list of each vector: its nearest centroid among
// those of its coarseNear nearest coarse clusters (a vector near the border
// of its coarse cluster may be nearest to a centroid of the next one, and a
// search probes by the nearest centroids).
func (ix *Index) train(vecs [][]float32) []int {
	n, d := len(vecs), ix.dim
	lists := ix.opts.Lists
	if lists <= 0 {
		lists = max(1, n/DefaultPerList)
	}
	lists = max(1, min(lists, n))
	rng := rand.New(rand.NewPCG(ix.opts.Seed, 0x5eed))
	top := max(1, int(math.Sqrt(float64(lists))))
	coarse := ix.kmeans(rng, sample(rng, vecs, top*trainPerCentroid), top)
	near := parallel(len(vecs), func(i int) []int { return nearestN(d, coarse, vecs[i], coarseNear) })
	members := make([][][]float32, top)
	for i, cs := range near {
		members[cs[0]] = append(members[cs[0]], vecs[i])
	}
	var cents []float32
	bounds := make([][2]int, top) // each coarse cluster's centroids
	for c, m := range members {
		bounds[c][0] = len(cents) / d
		if len(m) > 0 {
			k := max(1, min(len(m), int(math.Round(float64(lists)*float64(len(m))/float64(n)))))
			cents = append(cents, ix.kmeans(rng, sample(rng, m, k*trainPerCentroid), k)...)
		}
		bounds[c][1] = len(cents) / d
	}
	out := parallel(len(vecs), func(i int) int {
		best, bestSim := 0, float32(math.Inf(-1))
		for _, c := range near[i] {
			for l := bounds[c][0]; l < bounds[c][1]; l++ {
				if s := Dot(vecs[i], cents[l*d:(l+1)*d]); s > bestSim {
					best, bestSim = l, s
				}
			}
		}
		return best
	})
	ix.centroids = cents
	ix.lists = make([]list, len(cents)/d)
	ix.where = map[string]slot{}
	clear(ix.counts)
	return out
}

// coarseNear is how many coarse clusters a vector's list is chosen among.
const coarseNear = 3

// nearestN is the n centroids of cents nearest to v, nearest first.
func nearestN(d int, cents, v []float32, n int) []int {
	t := newTop(n)
	for c := 0; c*d < len(cents); c++ {
		t.offerIdx(c, Dot(v, cents[c*d:(c+1)*d]))
	}
	return t.idx
}

// parallel is fn of 0..n-1, computed on every processor.
func parallel[T any](n int, fn func(i int) T) []T {
	out := make([]T, n)
	workers := max(1, min(runtime.GOMAXPROCS(0), n/256))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				out[i] = fn(i)
			}
		})
	}
	wg.Wait()
	return out
}

// sample is at most n of vecs, chosen at random.
func sample(rng *rand.Rand, vecs [][]float32, n int) [][]float32 {
	if len(vecs) <= n {
		return vecs
	}
	out := make([][]float32, n)
	for i, j := range rng.Perm(len(vecs))[:n] {
		out[i] = vecs[j]
	}
	return out
}

// kmeans is k unit centroids of vecs (spherical k-means from k distinct
// random members), flattened.
func (ix *Index) kmeans(rng *rand.Rand, vecs [][]float32, k int) []float32 {
	d := ix.dim
	k = min(k, len(vecs))
	cents := make([]float32, k*d)
	for i, j := range rng.Perm(len(vecs))[:k] {
		copy(cents[i*d:], vecs[j])
	}
	sums := make([]float64, k*d)
	counts := make([]int, k)
	for range ix.opts.Iterations {
		assign := assignAll(d, cents, vecs)
		clear(sums)
		clear(counts)
		for i, c := range assign {
			counts[c]++
			s := sums[c*d : (c+1)*d]
			for j, x := range vecs[i] {
				s[j] += float64(x)
			}
		}
		for c := range k {
			if counts[c] == 0 {
				copy(cents[c*d:(c+1)*d], vecs[rng.IntN(len(vecs))]) // an empty cluster starts again elsewhere
				continue
			}
			var norm float64
			for _, x := range sums[c*d : (c+1)*d] {
				norm += x * x
			}
			if norm == 0 {
				continue
			}
			f := 1 / math.Sqrt(norm)
			for j, x := range sums[c*d : (c+1)*d] {
				cents[c*d+j] = float32(x * f)
			}
		}
	}
	return cents
}

// assignAll is the nearest centroid of each vector, computed in parallel.
func assignAll(d int, cents []float32, vecs [][]float32) []int {
	return parallel(len(vecs), func(i int) int { return nearest(d, cents, vecs[i]) })
}

func nearest(d int, cents, v []float32) int {
	best, bestSim := 0, float32(math.Inf(-1))
	for c := 0; c*d < len(cents); c++ {
		if s := Dot(v, cents[c*d:(c+1)*d]); s > bestSim {
			best, bestSim = c, s
		}
	}
	return best
}

// Add adds (or replaces) the unit vector of id with its label, in the list
// of its nearest centroid; an untrained index is trained on it alone
// first (Build trains on many).
func (ix *Index) Add(id, label string, v []float32) {
	if !ix.Trained() {
		ix.Train([][]float32{v})
	}
	ix.Remove(id)
	ix.put(id, v, label, nearest(ix.dim, ix.centroids, v))
}

func (ix *Index) put(id string, v []float32, label string, li int) {
	lid, ok := ix.labelIDs[label]
	if !ok {
		lid = uint16(len(ix.labels))
		ix.labelIDs[label] = lid
		ix.labels = append(ix.labels, label)
		ix.counts = append(ix.counts, 0)
	}
	l := &ix.lists[li]
	ix.where[id] = slot{li, len(l.ids)}
	l.ids = append(l.ids, id)
	l.labels = append(l.labels, lid)
	l.vecs = append(l.vecs, v...)
	ix.counts[lid]++
}

// Remove removes id's vector, if it is held.
func (ix *Index) Remove(id string) {
	s, ok := ix.where[id]
	if !ok {
		return
	}
	delete(ix.where, id)
	l := &ix.lists[s.list]
	last := len(l.ids) - 1
	ix.counts[l.labels[s.pos]]--
	if s.pos != last {
		l.ids[s.pos], l.labels[s.pos] = l.ids[last], l.labels[last]
		copy(l.vecs[s.pos*ix.dim:(s.pos+1)*ix.dim], l.vecs[last*ix.dim:])
		ix.where[l.ids[s.pos]] = s
	}
	l.ids, l.labels, l.vecs = l.ids[:last], l.labels[:last], l.vecs[:last*ix.dim]
}

// Search returns the k vectors most similar to the unit vector q, most
// similar first, among those whose label keep accepts (keep nil: all). A
// filter that keeps 1/n of the vectors probes n times the lists, up to all
// of them (an exact scan of the vectors kept).
func (ix *Index) Search(q []float32, k int, keep func(label string) bool) []Hit {
	if k <= 0 || ix.Len() == 0 {
		return nil
	}
	var allowed []bool
	kept := ix.Len()
	if keep != nil {
		allowed = make([]bool, len(ix.labels))
		kept = 0
		for i, l := range ix.labels {
			if keep(l) {
				allowed[i] = true
				kept += ix.counts[i]
			}
		}
		if kept == 0 {
			return nil
		}
	}
	// A filter that keeps a share of the vectors leaves that share of the
	// probed lists' vectors: probe as many more lists. When that is every
	// list, the search is an exact scan of the vectors kept.
	probes := min(ix.opts.Probes*ix.Len()/kept, len(ix.lists))
	top := newTop(k)
	for _, li := range ix.probe(q, probes) {
		l := &ix.lists[li]
		for i, id := range l.ids {
			if allowed != nil && !allowed[l.labels[i]] {
				continue
			}
			top.offer(Hit{id, Dot(q, l.vecs[i*ix.dim:(i+1)*ix.dim])})
		}
	}
	return top.hits
}

// probe is the n lists whose centroids are nearest to q.
func (ix *Index) probe(q []float32, n int) []int {
	if n >= len(ix.lists) {
		out := make([]int, len(ix.lists))
		for i := range out {
			out[i] = i
		}
		return out
	}
	return nearestN(ix.dim, ix.centroids, q, n)
}

// top keeps the k best hits seen, best first.
type top struct {
	k    int
	hits []Hit
	idx  []int
	sims []float32
}

func newTop(k int) *top { return &top{k: k} }

// better: a ranks before b (more similar, then by id).
func better(a, b Hit) bool { return a.Sim > b.Sim || (a.Sim == b.Sim && a.ID < b.ID) }

func (t *top) offer(h Hit) {
	if len(t.hits) == t.k && !better(h, t.hits[t.k-1]) {
		return
	}
	i, _ := slices.BinarySearchFunc(t.hits, h, func(a, b Hit) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	t.hits = slices.Insert(t.hits, i, h)
	if len(t.hits) > t.k {
		t.hits = t.hits[:t.k]
	}
}

func (t *top) offerIdx(c int, sim float32) {
	if len(t.idx) == t.k && sim <= t.sims[t.k-1] {
		return
	}
	i, _ := slices.BinarySearchFunc(t.sims, sim, func(a, b float32) int { return cmp.Compare(b, a) })
	t.sims = slices.Insert(t.sims, i, sim)
	t.idx = slices.Insert(t.idx, i, c)
	if len(t.idx) > t.k {
		t.sims, t.idx = t.sims[:t.k], t.idx[:t.k]
	}
}

// Exact returns the k vectors of vecs most similar to the unit vector q
// (by index in vecs, as ids), most similar first: the exact scan an
// approximate search is measured against.
func Exact(q []float32, vecs [][]float32, ids []string, k int) []Hit {
	t := newTop(k)
	for i, v := range vecs {
		t.offer(Hit{ids[i], Dot(q, v)})
	}
	return t.hits
}

// Dot is the dot product of a and b (of equal length): their cosine
// similarity when both are unit vectors.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// Unit is v scaled to length 1 (a copy); a zero vector stays zero.
func Unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	f := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * f)
	}
	return out
}
