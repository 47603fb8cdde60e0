package projections

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// The vector side of a code search. The vectors are the vectors projection's
// (each recorded embedding, by key) and which file has which is the code
// projection's (code/e: a file's embed hash); the nearest-neighbour graph
// over one work directory's vectors is derived from both at query time and
// kept in memory, brought up to date with the files changed since, so a
// server answers a second query without reading every vector again.
//
// The search is an exact scan over unit vectors (a dot product each): at a
// work directory's size (20,000 files of 768 dimensions, 15M multiply-adds)
// it takes milliseconds and its recall is 1. github.com/coder/hnsw, the
// maintained Go HNSW on the module proxy, was measured and not adopted: its
// layer search stops at the first step that does not improve the best
// distance, and its recall@10 on 2,500 random 24-dimension vectors was
// 0.09-0.34 whatever EfSearch.

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
}

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
		ix = &vectorIndex{prefix: prefix, model: e.Model, dims: e.Dims}
		v.m[k] = ix
	}
	return ix
}

// nearest returns the k texts listed under prefix (up to date with the
// listing at seq) whose vectors by e's model are nearest to e's, nearest
// first, and how many texts have a vector.
func (v *vectorIndexes) nearest(r pebble.Reader, prefix []byte, seq uint64, e *CodeEmbedding, k int) ([]vectorHit, int, error) {
	ix := v.get(prefix, e)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.sync(r, seq); err != nil {
		return nil, 0, err
	}
	near, err := ix.search(e.Vector, k)
	return near, len(ix.vecs), err
}

// rerank fuses the lexical ranking hits with the vector ranking of the
// texts listed under prefix when e is set (RankHybrid), and returns the
// ranking, how it was made, and how many texts had a vector.
func (v *vectorIndexes) rerank(r pebble.Reader, prefix []byte, seq uint64, e *CodeEmbedding, limit int, hits []CodeHit) ([]CodeHit, string, int, error) {
	if e == nil {
		return hits, RankLexical, 0, nil
	}
	near, n, err := v.nearest(r, prefix, seq, e, max(5*limit, 50))
	if err != nil {
		return nil, "", n, err
	}
	return fuse(hits, near), RankHybrid, n, nil
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
	hashes  map[string]string    // id -> embed hash of the vector held
	vecs    map[string][]float32 // id -> vector
	missing int                  // files whose vector is not recorded yet
	width   int                  // the vectors' length
}

// vectorHit is a text (a file's path, a chunk's id) and its cosine
// similarity to the query.
type vectorHit struct {
	path string
	sim  float32
}

// sync brings the index up to date with r: the texts whose embed hash
// changed, the texts gone, the vectors recorded since.
func (v *vectorIndex) sync(r pebble.Reader, rootSeq uint64) error {
	if v.hashes != nil && v.rootSeq == rootSeq && v.missing == 0 {
		return nil
	}
	cur, err := readMap(r, v.prefix)
	if err != nil {
		return err
	}
	if v.hashes == nil {
		v.hashes, v.vecs = map[string]string{}, map[string][]float32{}
	}
	for p, h := range v.hashes {
		if cur[p] != h {
			delete(v.hashes, p)
			delete(v.vecs, p)
		}
	}
	v.missing = 0
	for p, h := range cur {
		if v.hashes[p] == h {
			continue
		}
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
		v.hashes[p], v.vecs[p] = h, unit(e.Vector)
	}
	v.rootSeq = rootSeq
	return nil
}

// search returns the k files nearest to vec, nearest first.
func (v *vectorIndex) search(vec []float32, k int) ([]vectorHit, error) {
	if len(v.vecs) == 0 {
		return nil, nil
	}
	if len(vec) != v.width {
		return nil, fmt.Errorf("%w: code: the query's vector has %d dimensions, the index's %d (another model?)", ErrInvalidQuery, len(vec), v.width)
	}
	return scanNearest(v.vecs, vec, k), nil
}

// scanNearest is the exact scan: the k unit vectors of vecs nearest to q.
func scanNearest(vecs map[string][]float32, q []float32, k int) []vectorHit {
	if k <= 0 {
		return nil
	}
	q = unit(q)
	// The k best so far, best first: most vectors fall below the last and
	// cost a comparison, not a place in a sort of them all.
	top := make([]vectorHit, 0, k+1)
	for p, x := range vecs {
		h := vectorHit{p, dot(q, x)}
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

// unit is v scaled to length 1 (a copy); a zero vector stays zero.
func unit(v []float32) []float32 {
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

// dot is the dot product of a and b (of equal length): their cosine
// similarity when both are unit vectors.
func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
