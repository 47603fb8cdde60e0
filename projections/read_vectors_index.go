package projections

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/projections/ann"
	"github.com/sylk/sylk/schemas"
)

// The vector side of a code, documents or graph search. The vectors are the
// vectors projection's (each recorded embedding, by key) and which text has
// which is the listing of the projection searched (code/e: a file's embed
// hash and its language; docs/e: a chunk's; graph/e: a node's, with its
// domain, type and supersession); the nearest-neighbour graph over them is
// derived from both at query time and kept in memory, brought up to date
// with the texts changed since, so a server answers a second query without
// reading every vector again. Each vector carries its text's label, and a
// search's filter is applied while the vectors are scanned, so a filter
// that keeps few of them still gets k.
//
// The search is an exact scan over unit vectors (a dot product each) up to
// annMinVectors vectors, where it takes milliseconds and its recall is 1;
// above, an IVF index (package ann) built from the same vectors in memory,
// kept up to date as they change and trained again when they have doubled,
// reads a few of its lists. Training takes seconds at 100,000 vectors (about
// 8.5 s of CPU), so it runs in the background: until it ends a search scans
// exactly (tens of milliseconds there), or goes through the index trained
// before, which vectors added since were put into; the changes made during
// the training are applied to the new index before it takes over. No query
// waits for a training (`sylk bench vector`: 100,000 x 768, recall@10
// against the exact scan and speed beside it). github.com/coder/hnsw, the
// maintained Go HNSW on the module proxy, was measured and not adopted: its
// recall@10 on 2,500 random 24-dimension vectors was 0.09-0.34 whatever
// EfSearch.

// annMinVectors is the size from which a search goes through the IVF index.
const annMinVectors = 20000

// CodeEmbedding asks a search to rank by vector similarity too: the query's
// vector, by the model (and dimensions) the files' vectors were made with.
type CodeEmbedding struct {
	Model  string    `json:"model"`
	Dims   int       `json:"dims,omitempty"`
	Vector []float32 `json:"vector"`
}

// vectorIndexes are the in-memory indexes of a store, by work directory and
// model.
type vectorIndexes struct {
	mu sync.Mutex
	m  map[string]*vectorIndex
	// builds are the trainings running in the background (Store.Close
	// waits for them).
	builds sync.WaitGroup
}

// wait returns once no training runs.
func (v *vectorIndexes) wait() { v.builds.Wait() }

// get is the index of the vectors of the texts listed under prefix (id ->
// embed hash) by e's model.
func (v *vectorIndexes) get(prefix []byte, e *CodeEmbedding) *vectorIndex {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := string(prefix) + "\x00" + e.Model + "\x00" + fmt.Sprint(e.Dims)
	if v.m == nil {
		v.m = map[string]*vectorIndex{}
	}
	ix := v.m[k]
	if ix == nil {
		ix = &vectorIndex{prefix: prefix, model: e.Model, dims: e.Dims, builds: &v.builds}
		v.m[k] = ix
	}
	return ix
}

// nearest returns the k texts listed under prefix (up to date with the
// listing at seq) whose vectors by e's model are nearest to e's and whose
// labels keep accepts (nil: all), nearest first, and how many texts have a
// vector. The filter is applied inside the search, so a filter that keeps
// few texts still gets k of them when there are k.
func (v *vectorIndexes) nearest(r pebble.Reader, prefix []byte, seq uint64, e *CodeEmbedding, k int, keep func(label string) bool) ([]vectorHit, int, error) {
	ix := v.get(prefix, e)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.sync(r, seq); err != nil {
		return nil, 0, err
	}
	near, err := ix.search(e.Vector, k, keep)
	return near, len(ix.vecs), err
}

// A listing's value is the embed hash of a text's vector, then, when the
// text has one, a NUL and its label (what a search filters by: a file's
// language, a graph node's domain and type).
func vectorListing(hash, label string) []byte {
	if label == "" {
		return []byte(hash)
	}
	return []byte(hash + "\x00" + label)
}

// splitListing is a listing value's embed hash and label.
func splitListing(v string) (hash, label string) {
	hash, label, _ = strings.Cut(v, "\x00")
	return hash, label
}

// rerank fuses the lexical ranking hits with the vector ranking of the
// texts listed under prefix when e is set (RankHybrid), and returns the
// ranking, how it was made, and how many texts had a vector.
func (v *vectorIndexes) rerank(r pebble.Reader, prefix []byte, seq uint64, e *CodeEmbedding, limit int, hits []CodeHit) ([]CodeHit, string, int, error) {
	if e == nil {
		return hits, RankLexical, 0, nil
	}
	near, n, err := v.nearest(r, prefix, seq, e, max(5*limit, 50), nil)
	if err != nil {
		return nil, "", n, err
	}
	return fuse(hits, near, nil), RankHybrid, n, nil
}

// vectorIndex is the vectors of one model of the texts listed under prefix
// (a work directory's files, or the documents' chunks), by id (a path, a
// chunk).
type vectorIndex struct {
	prefix []byte
	model  string
	dims   int

	mu      sync.Mutex
	rootSeq uint64               // the seq of the listing it is up to date with
	listed  map[string]string    // id -> listing value (embed hash, label) of the vector held
	labels  map[string]string    // id -> label
	vecs    map[string][]float32 // id -> vector
	missing int                  // files whose vector is not recorded yet
	width   int                  // the vectors' length
	// ann indexes vecs once there are annMin of them (0: annMinVectors);
	// trained is how many it was trained on.
	ann     *ann.Index
	annMin  int
	trained int
	// training is set while a new index is trained in the background;
	// changed holds the ids whose vector changed since its snapshot.
	training bool
	changed  map[string]bool
	builds   *sync.WaitGroup
	// trainHook, when set (tests), runs in the training goroutine before
	// it trains.
	trainHook func()
}

// vectorHit is a text (a file's path, a chunk's id) and its cosine
// similarity to the query.
type vectorHit struct {
	path string
	sim  float32
}

// sync brings the index up to date with r: the texts whose embed hash or
// label changed, the texts gone, the vectors recorded since.
func (v *vectorIndex) sync(r pebble.Reader, rootSeq uint64) error {
	if v.listed != nil && v.rootSeq == rootSeq && v.missing == 0 {
		return nil
	}
	cur, err := readMap(r, v.prefix)
	if err != nil {
		return err
	}
	if v.listed == nil {
		v.listed, v.labels, v.vecs = map[string]string{}, map[string]string{}, map[string][]float32{}
	}
	for p, old := range v.listed {
		now, ok := cur[p]
		if now == old {
			continue
		}
		oldHash, _ := splitListing(old)
		if hash, label := splitListing(now); ok && hash == oldHash {
			// Only the label changed: the vector stays.
			v.listed[p], v.labels[p] = now, label
			v.touched(p)
			continue
		}
		delete(v.listed, p)
		delete(v.labels, p)
		delete(v.vecs, p)
		v.touched(p)
	}
	v.missing = 0
	for p, lv := range cur {
		if v.listed[p] == lv {
			continue
		}
		h, label := splitListing(lv)
		raw, err := getFrom(r, vectorKey(schemas.EmbeddingKey(v.model, v.dims, h)))
		if err != nil {
			return err
		}
		if len(raw) < 8 {
			v.missing++
			continue
		}
		e, err := schemas.PayloadAs[schemas.Embedding](&schemas.Envelope{Type: schemas.TypeEmbedding, Payload: raw[8:]})
		if err != nil {
			return err
		}
		if v.width == 0 {
			v.width = len(e.Vector)
		}
		if len(e.Vector) != v.width {
			continue // the model changed its size: only the first size is searched
		}
		v.listed[p], v.labels[p], v.vecs[p] = lv, label, ann.Unit(e.Vector)
		v.touched(p)
	}
	v.rootSeq = rootSeq
	v.index()
	return nil
}

// touched keeps the index in use and a training in flight up to date with
// id's vector (or its absence) in vecs.
func (v *vectorIndex) touched(id string) {
	vec, ok := v.vecs[id]
	if v.ann != nil {
		if ok {
			v.ann.Add(id, v.labels[id], vec)
		} else {
			v.ann.Remove(id)
		}
	}
	if v.training {
		v.changed[id] = true
	}
}

// index starts training the IVF index of the vectors once there are
// enough of them, and again when they have doubled since it was trained
// (its centroids would no longer fit them); below the threshold it drops
// it. v.mu is held.
func (v *vectorIndex) index() {
	n := len(v.vecs)
	switch {
	case n < cmp.Or(v.annMin, annMinVectors):
		v.ann, v.trained = nil, 0
	case !v.training && (v.ann == nil || n > 2*v.trained):
		ids := slices.Sorted(maps.Keys(v.vecs))
		vecs, labels := make([][]float32, len(ids)), make([]string, len(ids))
		for i, id := range ids {
			vecs[i], labels[i] = v.vecs[id], v.labels[id]
		}
		v.training, v.changed = true, map[string]bool{}
		v.builds.Add(1)
		go func() {
			defer v.builds.Done()
			if v.trainHook != nil {
				v.trainHook()
			}
			ix := ann.New(v.width, ann.Options{})
			ix.Build(ids, vecs, labels)
			v.adopt(ix, len(ids))
		}()
	}
}

// adopt puts ix, trained on n vectors, in use once the vectors changed
// meanwhile are put into it, unless they have fallen below the threshold.
func (v *vectorIndex) adopt(ix *ann.Index, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.changed {
		if vec, ok := v.vecs[id]; ok {
			ix.Add(id, v.labels[id], vec)
		} else {
			ix.Remove(id)
		}
	}
	v.training, v.changed = false, nil
	if len(v.vecs) >= cmp.Or(v.annMin, annMinVectors) {
		v.ann, v.trained = ix, n
	}
}

// search returns the k texts nearest to vec whose labels keep accepts (nil:
// all), nearest first.
func (v *vectorIndex) search(vec []float32, k int, keep func(label string) bool) ([]vectorHit, error) {
	if len(v.vecs) == 0 {
		return nil, nil
	}
	if len(vec) != v.width {
		return nil, fmt.Errorf("%w: vectors: the query's vector has %d dimensions, the index's %d (another model?)", ErrInvalidQuery, len(vec), v.width)
	}
	if v.ann != nil {
		hits := v.ann.Search(ann.Unit(vec), k, keep)
		out := make([]vectorHit, len(hits))
		for i, h := range hits {
			out[i] = vectorHit{h.ID, h.Sim}
		}
		return out, nil
	}
	if keep != nil {
		return scanNearest(v.vecs, vec, k, func(id string) bool { return keep(v.labels[id]) }), nil
	}
	return scanNearest(v.vecs, vec, k, nil), nil
}

// scanNearest is the exact scan: the k unit vectors of vecs nearest to q of
// the ids keep accepts (nil: all).
func scanNearest(vecs map[string][]float32, q []float32, k int, keep func(id string) bool) []vectorHit {
	if k <= 0 {
		return nil
	}
	q = ann.Unit(q)
	// The k best so far, best first: most vectors fall below the last and
	// cost a comparison, not a place in a sort of them all.
	top := make([]vectorHit, 0, k+1)
	for p, x := range vecs {
		if keep != nil && !keep(p) {
			continue
		}
		h := vectorHit{p, ann.Dot(q, x)}
		if len(top) == k && nearer(top[k-1], h) {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, h, func(a, b vectorHit) int {
			if nearer(a, b) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, h)
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}

// nearer: a ranks before b (more similar, then by path).
func nearer(a, b vectorHit) bool {
	return a.sim > b.sim || (a.sim == b.sim && a.path < b.path)
}
