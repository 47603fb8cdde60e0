package projections

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// Code query kinds.
const (
	CodeSearch     = "search"     // BM25 over the files' terms
	CodeSymbol     = "symbol"     // declarations named Text ("Name" or "Recv.Method")
	CodeCallers    = "callers"    // calls to Text
	CodeCallees    = "callees"    // calls made by the function or method Text
	CodeDeps       = "deps"       // packages the package Text imports
	CodeDependents = "dependents" // packages (or files) importing Text
	CodeHealth     = "health"     // maturity, debt, tests under the path prefix Text
	CodeStatus     = "status"     // what is indexed, what was skipped and why
	CodeHashes     = "hashes"     // path -> content hash of every indexed file
	CodeEmbeds     = "embeds"     // path -> embed hash of every file with one
)

var codeKinds = []string{CodeSearch, CodeSymbol, CodeCallers, CodeCallees, CodeDeps, CodeDependents, CodeHealth, CodeStatus, CodeHashes, CodeEmbeds}

// How a search ranked its hits (CodeResult.Ranking).
const (
	RankLexical = "bm25"
	// RankHybrid fuses rankings by reciprocal rank (each text scores the
	// sum of 1/(60+rank) over them): of a code search, the BM25 ranking, the
	// vector ranking and the graph ranking (the files that call, or are
	// called by, the best of the other two, and the files the knowledge
	// graph joins to them); of a documents search, BM25 and vectors; of a
	// graph search, BM25, vectors and the graph's neighbourhood.
	RankHybrid = "hybrid"
)

// A hybrid code search's graph ranking starts from the graphSeeds best
// files of the lexical and vector rankings and follows at most graphFanout
// links of each kind from each.
const (
	graphSeeds  = 10
	graphFanout = 20
)

// rrfK is reciprocal rank fusion's constant (Cormack et al.: 60).
const rrfK = 60

// DefaultCodeLimit is how many results a code query returns when it sets no
// limit.
const DefaultCodeLimit = 10

// CodeQuery asks the code index of one work directory.
type CodeQuery struct {
	// Root is the work directory, absolute.
	Root string `json:"root"`
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
	// Limit bounds hits, symbols, calls and skipped files (0: DefaultCodeLimit).
	Limit int `json:"limit,omitempty"`
	// Embedding, for a search, ranks by vector similarity too (hybrid).
	Embedding *CodeEmbedding `json:"embedding,omitempty"`
	// Types keep the declarations of these kinds (schemas.SymbolKinds): a
	// symbol query's, and a search's files declaring one whose name holds
	// a query term (the hit lists those).
	Types []string `json:"types,omitempty"`
	// Langs keep the files of these languages (schemas.CodeLanguages): a
	// search's and a symbol query's, and the calls in them of a callers or
	// callees query.
	Langs []string `json:"langs,omitempty"`
	// Paths narrow a hashes query to these files (relative to the root):
	// what an update of a few files needs to know.
	Paths []string `json:"paths,omitempty"`
}

// keepsFile reports whether q's language filter keeps f.
func (q *CodeQuery) keepsFile(f *CodeFile) bool {
	return len(q.Langs) == 0 || slices.Contains(q.Langs, f.Lang)
}

// keepsSymbol reports whether q's type filter keeps s.
func (q *CodeQuery) keepsSymbol(s *schemas.Symbol) bool {
	return len(q.Types) == 0 || slices.Contains(q.Types, s.Kind)
}

// Validate reports what is wrong with q, wrapping ErrInvalidQuery.
func (q *CodeQuery) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: code: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
	}
	switch {
	case !path.IsAbs(q.Root):
		return bad("root %q is not an absolute path", q.Root)
	case !slices.Contains(codeKinds, q.Kind):
		return bad("kind %q is not one of %s", q.Kind, strings.Join(codeKinds, ", "))
	case q.Limit < 0:
		return bad("limit %d is negative", q.Limit)
	case strings.TrimSpace(q.Text) == "" && q.Kind != CodeHealth && q.Kind != CodeStatus && q.Kind != CodeHashes && q.Kind != CodeEmbeds:
		return bad("a %s query needs text", q.Kind)
	case q.Embedding != nil && q.Kind != CodeSearch:
		return bad("an embedding goes with a search, not a %s query", q.Kind)
	case q.Embedding != nil && (q.Embedding.Model == "" || len(q.Embedding.Vector) == 0):
		return bad("the embedding needs its model and its vector")
	case len(q.Types) > 0 && q.Kind != CodeSearch && q.Kind != CodeSymbol:
		return bad("types filter a search or a symbol query, not a %s query", q.Kind)
	case len(q.Paths) > 0 && q.Kind != CodeHashes:
		return bad("paths narrow a hashes query, not a %s query", q.Kind)
	case len(q.Langs) > 0 && !slices.Contains([]string{CodeSearch, CodeSymbol, CodeCallers, CodeCallees}, q.Kind):
		return bad("languages filter a search, a symbol, callers or callees query, not a %s query", q.Kind)
	}
	for _, t := range q.Types {
		if !slices.Contains(schemas.SymbolKinds, t) {
			return bad("type %q is not one of %s", t, strings.Join(schemas.SymbolKinds, ", "))
		}
	}
	for _, l := range q.Langs {
		if !slices.Contains(schemas.CodeLanguages, l) {
			return bad("language %q is not one of %s", l, strings.Join(schemas.CodeLanguages, ", "))
		}
	}
	return nil
}

// CodeResult answers a CodeQuery; the field of its kind is set.
type CodeResult struct {
	Root string `json:"root"`
	// Indexed: the work directory has an index (empty results of an
	// unindexed directory mean nothing).
	Indexed  bool              `json:"indexed"`
	Hits     []CodeHit         `json:"hits,omitempty"`
	Symbols  []CodeSymbolHit   `json:"symbols,omitempty"`
	Calls    []CodeCall        `json:"calls,omitempty"`
	Packages []string          `json:"packages,omitempty"`
	Health   *CodeHealthReport `json:"health,omitempty"`
	Status   *CodeIndexStatus  `json:"status,omitempty"`
	Hashes   map[string]string `json:"hashes,omitempty"`
	// Skipped (with Hashes) is why each skipped file was left out.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Unknown lists query terms no file contains.
	Unknown []string `json:"unknown,omitempty"`
	// Ranking is how a search ranked: RankLexical or RankHybrid.
	Ranking string `json:"ranking,omitempty"`
	// Vectors is how many files a hybrid search had vectors of.
	Vectors int `json:"vectors,omitempty"`
}

// CodeHit is one file a search found, with the declarations in it whose
// names hold a query term.
type CodeHit struct {
	Path    string          `json:"path"`
	Score   float64         `json:"score"`
	Lang    string          `json:"lang"`
	Symbols []CodeSymbolHit `json:"symbols,omitempty"`
	// Lexical is the BM25 score, Similarity the cosine similarity to the
	// query's vector and Graph the call-graph score (the sum, over the best
	// files it calls or is called by, of 1/(1+their rank)), of a hybrid
	// search (Score is then the fused one).
	Lexical    float64 `json:"lexical,omitempty"`
	Similarity float64 `json:"similarity,omitempty"`
	Graph      float64 `json:"graph,omitempty"`
	// Knowledge is the part of Graph the knowledge graph gave: the
	// trust-weighted neighbourhood of the best files' nodes (those whose
	// path is the file's), in files other nodes reached are in.
	Knowledge float64 `json:"knowledge,omitempty"`
}

// CodeSymbolHit is a declaration and where it is.
type CodeSymbolHit struct {
	schemas.Symbol
	Path    string `json:"path"`
	Package string `json:"package,omitempty"`
}

// CodeCall is a call and where it is.
type CodeCall struct {
	schemas.Call
	Path    string `json:"path"`
	Package string `json:"package,omitempty"`
}

// CodeHealthReport is the seed's codebase health summary (seed L17033-17075)
// computed from the index: maturity from the test ratio and the density of
// debt markers, and the share of declarations with a doc comment.
type CodeHealthReport struct {
	Area        string  `json:"area"`
	Files       int     `json:"files"`
	SourceFiles int     `json:"source_files"`
	TestFiles   int     `json:"test_files"`
	Lines       int     `json:"lines"`
	TestRatio   float64 `json:"test_ratio"`
	DebtMarkers int     `json:"debt_markers"`
	DebtPer1K   float64 `json:"debt_per_1k_lines"`
	Documented  float64 `json:"documented"`
	// Languages counts the source files (not tests, not build files) of
	// each programming language.
	Languages map[string]int `json:"languages,omitempty"`
	// Maturity: DISCIPLINED, TRANSITIONAL, LEGACY or GREENFIELD.
	Maturity       string `json:"maturity"`
	Recommendation string `json:"recommendation"`
}

// Maturity thresholds of CodeHealthReport.
const (
	greenfieldMaxFiles  = 5    // fewer source files than this: no patterns yet
	disciplinedTests    = 0.5  // test files per source file
	disciplinedDebt1K   = 2.0  // debt markers per 1000 lines
	legacyTests         = 0.1  // below: LEGACY
	legacyDebt1K        = 10.0 // above: LEGACY
	disciplinedDocRatio = 0.5  // documented declarations
)

// CodeIndexStatus is what the index of a work directory holds.
type CodeIndexStatus struct {
	Files  int   `json:"files"`
	Length int64 `json:"terms"`
	// Seq is the last index_update applied.
	Seq     uint64              `json:"seq"`
	Skipped []schemas.IndexSkip `json:"skipped,omitempty"`
	// SkippedTotal counts every skipped file, beyond Limit.
	SkippedTotal int `json:"skipped_total"`
}

// Code answers q from the code index.
func (s *Store) Code(ctx context.Context, q CodeQuery) (*CodeResult, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultCodeLimit
	}
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	c := &codeReader{ctx: ctx, r: snap, rid: RootID(q.Root), files: map[string]*CodeFile{}, vectors: &s.vectors}
	out := &CodeResult{Root: q.Root}
	root, err := c.root()
	if err != nil || root == nil {
		return out, err
	}
	c.segments = s.codeSegments.of(c.rid, root.Seq)
	out.Indexed = true
	switch q.Kind {
	case CodeSearch:
		err = c.search(root, &q, out)
	case CodeSymbol:
		out.Symbols, err = c.symbols(q.Text, q.Limit, &q)
	case CodeCallers:
		out.Calls, err = c.callers(q.Text, q.Limit, &q)
	case CodeCallees:
		out.Calls, err = c.callees(q.Text, q.Limit, &q)
	case CodeDeps:
		out.Packages, err = c.deps(q.Text)
	case CodeDependents:
		out.Packages, err = c.dependents(q.Text)
	case CodeHealth:
		out.Health, err = c.health(q.Text)
	case CodeStatus:
		out.Status, err = c.status(root, q.Limit)
	case CodeHashes:
		out.Hashes, out.Skipped, err = c.hashes(q.Paths)
	case CodeEmbeds:
		out.Hashes, err = c.embeds()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// codeReader reads one work directory's index from a snapshot, decoding
// each file record once.
type codeReader struct {
	ctx      context.Context
	r        pebble.Reader
	rid      string
	files    map[string]*CodeFile
	segments *rootSegments
	vectors  *vectorIndexes
}

func (c *codeReader) root() (*codeRoot, error) {
	v, err := getFrom(c.r, codeRootKey(c.rid))
	if err != nil || v == nil {
		return nil, err
	}
	r := &codeRoot{}
	return r, json.Unmarshal(v, r)
}

func (c *codeReader) file(pth string) (*CodeFile, error) {
	if f, ok := c.files[pth]; ok {
		return f, nil
	}
	v, err := getFrom(c.r, codeFileKey(c.rid, pth))
	if err != nil || v == nil {
		return nil, err
	}
	f, err := decodeCodeFile(v)
	if err != nil {
		return nil, fmt.Errorf("decode code file %q: %w", pth, err)
	}
	c.files[pth] = f
	return f, nil
}

// segment is a segment's paths, its files' lengths and its dead files. A
// path is made a string only for the files a search returns.
type segment struct {
	paths []byte  // newline-separated
	offs  []int   // where each path starts, and len(paths)+1 last
	lens  []int32 // each file's length (BM25's), by index
	dead  []bool  // by index; nil when none is
}

func (g *segment) len() int { return len(g.offs) - 1 }

func (g *segment) path(i int) []byte { return g.paths[g.offs[i] : g.offs[i+1]-1] }

// segmentCache keeps the segments searches read, by work directory, while
// its index is unchanged: a segment's paths and dead files change only
// with an index_update, which moves the root's seq.
type segmentCache struct {
	mu sync.Mutex
	m  map[string]*rootSegments
}

// rootSegments are the segments of one work directory's index at seq.
type rootSegments struct {
	seq  uint64
	mu   sync.Mutex
	segs map[uint64]*segment
}

// of is the segments of the index of rid at seq (the root's).
func (sc *segmentCache) of(rid string, seq uint64) *rootSegments {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil {
		sc.m = map[string]*rootSegments{}
	}
	rs := sc.m[rid]
	if rs == nil || rs.seq != seq {
		rs = &rootSegments{seq: seq, segs: map[uint64]*segment{}}
		sc.m[rid] = rs
	}
	return rs
}

func (c *codeReader) segment(seq uint64) (*segment, error) {
	c.segments.mu.Lock()
	g := c.segments.segs[seq]
	c.segments.mu.Unlock()
	if g != nil {
		return g, nil
	}
	k := codeSegmentPathsKey(c.rid, seq)
	v, err := getFrom(c.r, k)
	if err != nil {
		return nil, err
	}
	v, lens, ok := bytes.Cut(v, []byte{0}) // see segmentPaths
	g = &segment{paths: v, offs: make([]int, 1, bytes.Count(v, []byte{'\n'})+2)}
	for i, b := range v {
		if b == '\n' {
			g.offs = append(g.offs, i+1)
		}
	}
	g.offs = append(g.offs, len(v)+1)
	g.lens = make([]int32, 0, g.len())
	for len(lens) > 0 && len(g.lens) < g.len() {
		n, w := binary.Uvarint(lens)
		if w <= 0 || n > math.MaxInt32 {
			break
		}
		g.lens, lens = append(g.lens, int32(n)), lens[w:]
	}
	if !ok || len(g.lens) != g.len() || len(lens) > 0 {
		return nil, fmt.Errorf("code: a corrupt segment at %q: %d paths, %d lengths", k, g.len(), len(g.lens))
	}
	prefix := codeDeadPrefix(c.rid, seq)
	var dead map[string]bool
	err = scanPrefix(c.r, prefix, func(k, _ []byte) error {
		if dead == nil {
			dead = map[string]bool{}
		}
		dead[string(k[len(prefix):])] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if dead != nil {
		g.dead = make([]bool, g.len())
		for i := range g.dead {
			g.dead[i] = dead[string(g.path(i))]
		}
	}
	c.segments.mu.Lock()
	c.segments.segs[seq] = g
	c.segments.mu.Unlock()
	return g, nil
}

// search ranks files by BM25 over the query's terms, and when the query has
// an embedding fuses that ranking with the vector and call-graph rankings.
func (c *codeReader) search(root *codeRoot, q *CodeQuery, out *CodeResult) error {
	terms, err := queryTerms("code", q.Text)
	if err != nil {
		return err
	}
	var keep func(string) (bool, error)
	if len(q.Types) > 0 || len(q.Langs) > 0 {
		keep = func(p string) (bool, error) {
			f, err := c.file(p)
			if err != nil || f == nil || !q.keepsFile(f) {
				return false, err
			}
			return len(q.Types) == 0 || len(namedSymbols(f, terms, q)) > 0, nil
		}
	}
	// Fusion reads deeper than the page: a file may rank low in one list
	// and high in another.
	depth := max(5*q.Limit, 50)
	hits, unknown, err := c.lexical(root, terms, depth, keep)
	if err != nil {
		return err
	}
	out.Unknown, out.Ranking = unknown, RankLexical
	if q.Embedding != nil {
		if hits, out.Vectors, err = c.hybrid(root, q, hits, depth, keep); err != nil {
			return err
		}
		out.Ranking = RankHybrid
	}
	if len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	for i := range hits {
		f, err := c.file(hits[i].Path)
		if err != nil {
			return err
		}
		if f == nil {
			continue
		}
		hits[i].Lang = f.Lang
		hits[i].Symbols = namedSymbols(f, terms, q)
	}
	out.Hits = hits
	return nil
}

// namedSymbols are the declarations of f whose names hold one of terms, of
// the types q keeps.
func namedSymbols(f *CodeFile, terms []string, q *CodeQuery) []CodeSymbolHit {
	var out []CodeSymbolHit
	for i := range f.Symbols {
		sym := &f.Symbols[i]
		if !q.keepsSymbol(sym) {
			continue
		}
		named := false
		Terms(sym.Name, func(t string) { named = named || slices.Contains(terms, t) })
		if named {
			out = append(out, CodeSymbolHit{Symbol: *sym, Path: f.Path, Package: f.Package})
		}
	}
	return out
}

// scoredFile is a file a search scored: its index among the files of the
// segments the search read (searchScratch.scores).
type scoredFile struct {
	score float64
	at    int32
}

// searchScratch is the memory a search scores in, reused by the next: a
// large tree's common words have postings in tens of thousands of files.
type searchScratch struct {
	postings []termPosting
	scores   []float64
	scored   []scoredFile
}

// termPosting is one file's posting of a term: the file's index among the
// files of the segments read, its count and its length.
type termPosting struct {
	at, tf, dl int32
}

var searchScratches = sync.Pool{New: func() any { return new(searchScratch) }}

// lexical ranks the files holding terms by BM25 and returns the best k that
// keep (nil: all) keeps, best first (ties by path), and the terms no file
// holds. Scores are summed by a file's index among the segments read, so a
// path is looked at only when its file is among the best.
func (c *codeReader) lexical(root *codeRoot, terms []string, k int, keep func(string) (bool, error)) ([]CodeHit, []string, error) {
	avgdl := float64(root.Length) / float64(max(root.Files, 1))
	sc := searchScratches.Get().(*searchScratch)
	defer searchScratches.Put(sc)
	sc.scores = sc.scores[:0]
	var (
		segs    []*segment // read, in order
		bases   []int      // where each one's files start in sc.scores
		base    = map[*segment]int{}
		unknown []string
	)
	for _, term := range terms {
		ps := sc.postings[:0]
		prefix := codeTermFamily.lists().listPrefix(c.rid, term)
		err := scanPrefix(c.r, prefix, func(key, v []byte) error {
			v, err := codeTermFamily.section(v)
			if err != nil || len(v) == 0 { // a name that is no term of the segment's files
				return errAt(err, key)
			}
			g, err := c.segment(binary.BigEndian.Uint64(key[len(prefix):]))
			if err != nil {
				return err
			}
			at, ok := base[g]
			if !ok {
				at = len(sc.scores)
				base[g] = at
				segs, bases = append(segs, g), append(bases, at)
				sc.scores = append(sc.scores, make([]float64, g.len())...)
			}
			for len(v) > 0 {
				var x [2]uint64
				for j := range x {
					n := 0
					x[j], n = binary.Uvarint(v)
					if n <= 0 {
						return fmt.Errorf("code: a corrupt posting list at %q", key)
					}
					v = v[n:]
				}
				if x[0] >= uint64(g.len()) {
					return fmt.Errorf("code: a posting of file %d in a segment of %d at %q", x[0], g.len(), key)
				}
				if i := int(x[0]); g.dead == nil || !g.dead[i] {
					ps = append(ps, termPosting{at: int32(at + i), tf: int32(x[1]), dl: g.lens[i]})
				}
			}
			return nil
		})
		sc.postings = ps
		if err != nil {
			return nil, nil, err
		}
		if len(ps) == 0 {
			unknown = append(unknown, term)
		}
		for _, p := range ps {
			sc.scores[p.at] += bm25(int(p.tf), int(p.dl), len(ps), root.Files, avgdl)
		}
	}
	scored := sc.scored[:0]
	for i, s := range sc.scores {
		if s > 0 {
			scored = append(scored, scoredFile{s, int32(i)})
		}
	}
	sc.scored = scored
	path := func(at int32) []byte {
		j, _ := slices.BinarySearch(bases, int(at))
		if j == len(bases) || bases[j] > int(at) {
			j--
		}
		return segs[j].path(int(at) - bases[j])
	}
	better := func(a, b scoredFile) int {
		if d := cmp.Compare(b.score, a.score); d != 0 {
			return d
		}
		return bytes.Compare(path(a.at), path(b.at))
	}
	// Take the best k, then more while the filter leaves fewer than k.
	var hits []CodeHit
	for n := k; ; n *= 4 {
		best := bestOf(scored, n, better)
		hits = hits[:0]
		for _, sf := range best {
			p := string(path(sf.at))
			if keep != nil {
				if ok, err := keep(p); err != nil || !ok {
					if err != nil {
						return nil, nil, err
					}
					continue
				}
			}
			if hits = append(hits, CodeHit{Path: p, Score: sf.score}); len(hits) == k {
				break
			}
		}
		if len(hits) == k || len(best) == len(scored) {
			return hits, unknown, nil
		}
	}
}

// bestOf returns the n best of items by better (negative: a is better than
// b), best first; it may reorder items.
func bestOf[T any](items []T, n int, better func(a, b T) int) []T {
	if len(items) <= n {
		slices.SortFunc(items, better)
		return items
	}
	// A heap of the best n so far, the worst of them at its root.
	h := slices.Clone(items[:n])
	worse := func(i, j int) bool { return better(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < n && worse(l, w) {
				w = l
			}
			if r < n && worse(r, w) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, it := range items[n:] {
		if better(it, h[0]) < 0 {
			h[0] = it
			down(0)
		}
	}
	slices.SortFunc(h, better)
	return h
}

// hybrid fuses the lexical ranking with the vector ranking of the query's
// embedding (of the files of the languages q keeps) and the call-graph
// ranking around the best of both, keeping what keep keeps, and says how
// many files have a vector.
func (c *codeReader) hybrid(root *codeRoot, q *CodeQuery, lexical []CodeHit, depth int, keep func(string) (bool, error)) ([]CodeHit, int, error) {
	var langs func(string) bool
	if len(q.Langs) > 0 {
		langs = func(lang string) bool { return slices.Contains(q.Langs, lang) }
	}
	near, n, err := c.vectors.nearest(c.r, codeEmbedsPrefix(c.rid), root.Seq, q.Embedding, depth, langs)
	if err != nil {
		return nil, n, err
	}
	// The language filter was applied inside the vector search; a type
	// filter depends on the query's words, so it is applied to the hits.
	if len(q.Types) > 0 {
		kept := near[:0]
		for _, h := range near {
			ok, err := keep(h.path)
			if err != nil {
				return nil, n, err
			}
			if ok {
				kept = append(kept, h)
			}
		}
		near = kept
	}
	seeds := fuse(lexical, near, nil)
	graph, err := c.graphRank(seeds[:min(len(seeds), graphSeeds)], depth, keep)
	if err != nil {
		return nil, n, err
	}
	return fuse(lexical, near, graph), n, nil
}

// graphRank ranks the files one link away from seeds (best first) in the
// code's call graph, at most k: the files calling what a seed declares, and
// the files declaring what it calls, each link scoring 1/(1+the seed's
// rank); calls of an unresolved method ("?.Name") link nothing. To that it
// adds the knowledge graph's score of each file (knowledgeRank).
func (c *codeReader) graphRank(seeds []CodeHit, k int, keep func(string) (bool, error)) ([]CodeHit, error) {
	score := map[string]float64{}
	all := &CodeQuery{}
	for rank, s := range seeds {
		f, err := c.file(s.Path)
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue
		}
		linked := map[string]bool{}
		for _, sym := range f.Symbols {
			if sym.Kind != "func" && sym.Kind != "method" || f.Package == "" {
				continue
			}
			name := f.Package + "." + sym.Name
			if sym.Recv != "" {
				name = f.Package + "." + sym.Recv + "." + sym.Name
			}
			calls, err := c.callers(name, graphFanout, all)
			if err != nil {
				return nil, err
			}
			for _, call := range calls {
				if !strings.HasPrefix(call.To, "?.") {
					linked[call.Path] = true
				}
			}
		}
		for i, call := range f.Calls {
			if i == graphFanout {
				break
			}
			if strings.HasPrefix(call.To, "?.") {
				continue
			}
			defs, err := c.symbols(call.To, graphFanout, all)
			if err != nil {
				return nil, err
			}
			for _, d := range defs {
				linked[d.Path] = true
			}
		}
		delete(linked, s.Path)
		for p := range linked {
			score[p] += 1 / float64(1+rank)
		}
	}
	knowledge, err := c.knowledgeRank(seeds)
	if err != nil {
		return nil, err
	}
	for p, sc := range knowledge {
		score[p] += sc
	}
	hits := make([]CodeHit, 0, len(score))
	for p, sc := range score {
		if f, err := c.file(p); err != nil || f == nil {
			if err != nil {
				return nil, err
			}
			continue // a path of the knowledge graph that is no file here
		}
		if keep != nil {
			if ok, err := keep(p); err != nil || !ok {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		hits = append(hits, CodeHit{Path: p, Score: sc, Knowledge: knowledge[p]})
	}
	sortHits(hits)
	return hits[:min(len(hits), k)], nil
}

// knowledgeRank scores the files the knowledge graph joins to seeds (best
// first): from each node whose path is a seed's (not superseded), the
// nodes within DefaultGraphDepth hops either way, through no superseded
// node, each scoring its path's weight times its trust over 100 (as a
// traversal does), divided by 1 + the seed's rank, for the file it is in.
func (c *codeReader) knowledgeRank(seeds []CodeHit) (map[string]float64, error) {
	score := map[string]float64{}
	for rank, s := range seeds {
		prefix := graphPathPrefix(s.Path)
		var ids []string
		if err := scanPrefix(c.r, prefix, func(k, _ []byte) error {
			ids = append(ids, string(k[len(prefix):]))
			return nil
		}); err != nil {
			return nil, err
		}
		for _, id := range ids {
			n, err := readJSON[GraphNodeRec](c.r, graphNodeKey(id))
			if err != nil {
				return nil, err
			}
			if n == nil || n.SupersededBy != "" {
				continue
			}
			walk := GraphQuery{Kind: GraphTraverse, ID: id, Direction: GraphBoth, Depth: DefaultGraphDepth, Limit: MaxGraphLimit}
			res := &GraphResult{}
			if err := graphTraverse(c.ctx, c.r, &walk, res); err != nil {
				return nil, err
			}
			for _, h := range res.Nodes {
				if h.Node.Path != "" && h.Node.Path != s.Path {
					score[h.Node.Path] += h.Score / float64(1+rank)
				}
			}
		}
	}
	return score, nil
}

// queryTerms are the distinct search terms of text; none is an error.
func queryTerms(what, text string) ([]string, error) {
	var terms []string
	Terms(text, func(t string) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	})
	if len(terms) == 0 {
		return nil, fmt.Errorf("%w: %s: %q has no searchable word (letters or digits, at least %d)", ErrInvalidQuery, what, text, minTermLen)
	}
	return terms, nil
}

// posting is a term's count in a text (a file, a chunk) of length dl; a
// dropped one counts in the term's document frequency but its text is not
// ranked (a filter leaves it out).
type posting struct {
	id     string
	tf, dl int
	drop   bool
}

// decodePosting reads the posting at key k under prefix (the rest of the
// key is the text's id): its value is the term's count and the text's
// length (uvarints), then what follows them (a graph node's label).
func decodePosting(prefix, k, v []byte) (posting, []byte, error) {
	tf, n := binary.Uvarint(v)
	dl, m := binary.Uvarint(v[max(n, 0):])
	if n <= 0 || m <= 0 {
		return posting{}, nil, fmt.Errorf("a corrupt posting at %q", k)
	}
	return posting{id: string(k[len(prefix):]), tf: int(tf), dl: int(dl)}, v[n+m:], nil
}

// rankBM25 scores every text the terms' postings name by BM25 over n texts
// of mean length avgdl, best first; df is counted while the postings are
// read, so it needs no counters of its own. unknown are the terms no text
// holds.
func rankBM25(terms []string, n int, avgdl float64, postings func(term string, add func(posting)) error) (hits []CodeHit, unknown []string, err error) {
	scores := map[string]float64{}
	var ps []posting
	for _, term := range terms {
		ps = ps[:0]
		if err := postings(term, func(p posting) { ps = append(ps, p) }); err != nil {
			return nil, nil, err
		}
		if len(ps) == 0 {
			unknown = append(unknown, term)
		}
		for _, p := range ps {
			if !p.drop {
				scores[p.id] += bm25(p.tf, p.dl, len(ps), n, avgdl)
			}
		}
	}
	hits = make([]CodeHit, 0, len(scores))
	for id, sc := range scores {
		hits = append(hits, CodeHit{Path: id, Score: sc})
	}
	sortHits(hits)
	return hits, unknown, nil
}

func sortHits(hits []CodeHit) {
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].Path < hits[j].Path
	})
}

// fuse merges the BM25 ranking (lexical, best first), the vector ranking
// (near, nearest first) and the graph ranking (best first; nil for none)
// by reciprocal rank.
func fuse(lexical []CodeHit, near []vectorHit, graph []CodeHit) []CodeHit {
	// The capacity holds every hit, so the pointers in byPath stay valid.
	out := make([]CodeHit, 0, len(lexical)+len(near)+len(graph))
	byPath := make(map[string]*CodeHit, len(lexical)+len(near)+len(graph))
	for i, h := range lexical {
		out = append(out, CodeHit{Path: h.Path, Lexical: h.Score, Score: 1 / float64(rrfK+i+1)})
		byPath[h.Path] = &out[len(out)-1]
	}
	// hit is the fused hit of p, made when p is new; rank adds its share.
	hit := func(p string, rank int) *CodeHit {
		h := byPath[p]
		if h == nil {
			out = append(out, CodeHit{Path: p})
			h = &out[len(out)-1]
			byPath[p] = h
		}
		h.Score += 1 / float64(rrfK+rank+1)
		return h
	}
	for i, n := range near {
		hit(n.path, i).Similarity = float64(n.sim)
	}
	for i, g := range graph {
		h := hit(g.Path, i)
		h.Graph, h.Knowledge = g.Score, g.Knowledge
	}
	sortHits(out)
	return out
}

// splitSymbol splits "Recv.Method" or "pkg/path.Name" into the qualifier
// and the name.
func splitSymbol(name string) (qual, last string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// symbols finds the declarations named name: "Name", "Recv.Method", or a
// package-qualified "pkg.Name" (the package's import path or its last
// element), of the types and in the files q keeps, by path and line.
func (c *codeReader) symbols(name string, limit int, q *CodeQuery) ([]CodeSymbolHit, error) {
	qual, last := splitSymbol(strings.TrimSpace(name))
	at, err := c.entries(codeSymbolFamily, strings.ToLower(last))
	if err != nil {
		return nil, err
	}
	var out []CodeSymbolHit
	for _, e := range at {
		if len(out) >= limit {
			break
		}
		f, err := c.file(e.path)
		if err != nil || f == nil || !q.keepsFile(f) {
			if err != nil {
				return nil, err
			}
			continue
		}
		for _, sym := range f.Symbols {
			if sym.Line == e.at && strings.EqualFold(sym.Name, last) && symbolQualifies(qual, sym.Recv, f.Package) && q.keepsSymbol(&sym) {
				out = append(out, CodeSymbolHit{Symbol: sym, Path: e.path, Package: f.Package})
			}
		}
	}
	return out, nil
}

// errAt says err (nil for none) is of the list at key k.
func errAt(err error, k []byte) error {
	if err != nil {
		return fmt.Errorf("code: %w at %q", err, k)
	}
	return nil
}

// listEntry is one live file's entry of a segment list: the file's path and
// what follows its index (a symbol's line, a call's index; 0 for none).
type listEntry struct {
	path string
	at   int
}

// entries reads f's lists of name (one key a segment) and returns the
// entries of their live files by path and value, each once.
func (c *codeReader) entries(f codeFamily, name string) ([]listEntry, error) {
	var out []listEntry
	err := scanPrefix(c.r, f.lists().listPrefix(c.rid, name), func(k, v []byte) error {
		return c.liveEntries(f, k, v, func(pth []byte, at int) {
			out = append(out, listEntry{path: string(pth), at: at})
		})
	})
	slices.SortFunc(out, func(a, b listEntry) int { return cmp.Or(strings.Compare(a.path, b.path), cmp.Compare(a.at, b.at)) })
	return slices.Compact(out), err
}

// liveEntries calls fn with each live file's entry of f in the segment
// list at key k: its path and the entry's first value after the file's
// index (0 when it has none).
func (c *codeReader) liveEntries(f codeFamily, k, v []byte, fn func(pth []byte, at int)) error {
	v, err := f.section(v)
	if err != nil || len(v) == 0 {
		return errAt(err, k)
	}
	g, err := c.segment(seqSuffix(k))
	if err != nil {
		return err
	}
	var x [3]uint64
	for len(v) > 0 {
		for j := range 1 + f.values {
			var n int
			if x[j], n = binary.Uvarint(v); n <= 0 {
				return fmt.Errorf("code: a corrupt list at %q", k)
			}
			v = v[n:]
		}
		if x[0] >= uint64(g.len()) {
			return fmt.Errorf("code: an entry of file %d in a segment of %d at %q", x[0], g.len(), k)
		}
		if i := int(x[0]); g.dead == nil || !g.dead[i] {
			fn(g.path(i), int(x[1]))
		}
	}
	return nil
}

// symbolQualifies: qual ("" for none) names the receiver or the package.
func symbolQualifies(qual, recv, pkg string) bool {
	switch {
	case qual == "":
		return true
	case strings.EqualFold(qual, recv):
		return true
	}
	return pkg != "" && (qual == pkg || strings.HasSuffix(pkg, "/"+qual) || !strings.Contains(pkg, "/") && qual == pkg)
}

// callers lists the calls to name in the files q keeps, by path and
// call. A qualified name ("pkg.Func", "Recv.Method") keeps calls whose
// callee has that qualifier, and calls of a method on a value of
// unresolved type ("?.Method").
func (c *codeReader) callers(name string, limit int, q *CodeQuery) ([]CodeCall, error) {
	qual, last := splitSymbol(strings.TrimSpace(name))
	at, err := c.entries(codeCallFamily, calleeName(last))
	if err != nil {
		return nil, err
	}
	var out []CodeCall
	for _, e := range at {
		if len(out) >= limit {
			break
		}
		f, err := c.file(e.path)
		if err != nil {
			return nil, err
		}
		if f == nil || e.at >= len(f.Calls) || !q.keepsFile(f) {
			continue
		}
		call := f.Calls[e.at]
		cq, cl := splitSymbol(call.To)
		if cl != last || qual != "" && cq != "?" && cq != qual && !strings.HasSuffix(cq, "/"+qual) && !strings.EqualFold(cq, qual) {
			continue
		}
		out = append(out, CodeCall{Call: call, Path: e.path, Package: f.Package})
	}
	return out, nil
}

// callees lists the calls made by the functions or methods named name, in
// the files q keeps.
func (c *codeReader) callees(name string, limit int, q *CodeQuery) ([]CodeCall, error) {
	defs, err := c.symbols(name, 1<<20, q)
	if err != nil {
		return nil, err
	}
	var out []CodeCall
	for _, d := range defs {
		from := d.Name
		if d.Recv != "" {
			from = d.Recv + "." + d.Name
		}
		f, err := c.file(d.Path)
		if err != nil || f == nil {
			return nil, err
		}
		for _, call := range f.Calls {
			if call.From == from && len(out) < limit {
				out = append(out, CodeCall{Call: call, Path: d.Path, Package: f.Package})
			}
		}
	}
	return out, nil
}

// packageFiles lists the files of pkg, by path: an import path, or the
// last elements of one when that names a single package.
func (c *codeReader) packageFiles(pkg string) ([]string, error) {
	collect := func(pkg string) ([]string, error) {
		at, err := c.entries(codePackageFamily, pkg)
		files := make([]string, len(at))
		for i, e := range at {
			files[i] = e.path
		}
		return files, err
	}
	if files, err := collect(pkg); err != nil || len(files) > 0 {
		return files, err
	}
	var matches []string
	all := under(key(codePackageFamily.lists().prefix, c.rid))
	err := scanPrefix(c.r, all, func(k, v []byte) error {
		rest := k[len(all):]
		p := string(rest[:bytes.IndexByte(rest, sep)])
		if !strings.HasSuffix(p, "/"+pkg) || slices.Contains(matches, p) {
			return nil
		}
		live := false
		err := c.liveEntries(codePackageFamily, k, v, func([]byte, int) { live = true })
		if live {
			matches = append(matches, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch len(matches) {
	case 0:
		return nil, fmt.Errorf("package %q: %w", pkg, ErrNotFound)
	case 1:
		return collect(matches[0])
	}
	return nil, fmt.Errorf("package %q could be %s: %w", pkg, strings.Join(matches, ", "), ErrAmbiguous)
}

// deps lists the packages pkg imports.
func (c *codeReader) deps(pkg string) ([]string, error) {
	files, err := c.packageFiles(pkg)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range files {
		f, err := c.file(p)
		if err != nil || f == nil {
			return nil, err
		}
		if !f.Test {
			out = append(out, f.Imports...)
		}
	}
	return dedup(out), nil
}

// dependents lists the packages that import pkg (a file's path when it has
// no package).
func (c *codeReader) dependents(pkg string) ([]string, error) {
	imp := pkg
	if files, err := c.packageFiles(pkg); err == nil && len(files) > 0 {
		if f, err := c.file(files[0]); err == nil && f != nil {
			imp = f.Package
		}
	}
	at, err := c.entries(codeImportFamily, imp)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range at {
		f, err := c.file(e.path)
		if err != nil {
			return nil, err
		}
		switch {
		case f == nil:
		case f.Package != "":
			out = append(out, f.Package)
		default:
			out = append(out, f.Path)
		}
	}
	return dedup(out), nil
}

// health summarises the files under the path prefix area.
func (c *codeReader) health(area string) (*CodeHealthReport, error) {
	area = strings.Trim(strings.TrimSpace(area), "/")
	prefix := codeFilesPrefix(c.rid)
	if area != "" && area != "." {
		prefix = append(prefix, area...)
	} else {
		area = "."
	}
	h := &CodeHealthReport{Area: area}
	decls, documented := 0, 0
	err := scanPrefix(c.r, prefix, func(k, v []byte) error {
		f, err := decodeCodeFile(v)
		if err != nil {
			return fmt.Errorf("decode code file %q: %w", k, err)
		}
		h.Files++
		h.Lines += f.Lines
		h.DebtMarkers += f.Debt
		switch {
		case f.Test:
			h.TestFiles++
		case f.Lang != "text" && f.Lang != "markdown" && f.Lang != "data":
			h.SourceFiles++
			if f.Lang == "build" {
				break
			}
			if h.Languages == nil {
				h.Languages = map[string]int{}
			}
			h.Languages[f.Lang]++
		}
		for _, s := range f.Symbols {
			decls++
			if s.Doc {
				documented++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if h.SourceFiles > 0 {
		h.TestRatio = float64(h.TestFiles) / float64(h.SourceFiles)
	}
	if h.Lines > 0 {
		h.DebtPer1K = float64(h.DebtMarkers) * 1000 / float64(h.Lines)
	}
	if decls > 0 {
		h.Documented = float64(documented) / float64(decls)
	}
	switch {
	case h.SourceFiles < greenfieldMaxFiles:
		h.Maturity, h.Recommendation = "GREENFIELD", "Establish patterns with the user's approval."
	case h.TestRatio < legacyTests || h.DebtPer1K > legacyDebt1K:
		h.Maturity, h.Recommendation = "LEGACY", "Isolate changes; do not spread the existing patterns."
	case h.TestRatio >= disciplinedTests && h.DebtPer1K <= disciplinedDebt1K && (decls == 0 || h.Documented >= disciplinedDocRatio):
		h.Maturity, h.Recommendation = "DISCIPLINED", "Follow the existing patterns strictly."
	default:
		h.Maturity, h.Recommendation = "TRANSITIONAL", "Follow the newer patterns; do not propagate the old ones."
	}
	return h, nil
}

func (c *codeReader) status(root *codeRoot, limit int) (*CodeIndexStatus, error) {
	st := &CodeIndexStatus{Files: root.Files, Length: root.Length, Seq: root.Seq}
	prefix := codeSkipsPrefix(c.rid)
	err := scanPrefix(c.r, prefix, func(k, v []byte) error {
		st.SkippedTotal++
		if len(st.Skipped) < limit {
			st.Skipped = append(st.Skipped, schemas.IndexSkip{Path: string(k[len(prefix):]), Reason: string(v)})
		}
		return nil
	})
	return st, err
}

// embeds is each file's embed hash.
func (c *codeReader) embeds() (map[string]string, error) {
	m, err := readMap(c.r, codeEmbedsPrefix(c.rid))
	for p, v := range m {
		m[p], _ = splitListing(v)
	}
	return m, err
}

// readMap reads the keys under prefix as a map from the rest of the key to
// the value.
func readMap(r pebble.Reader, prefix []byte) (map[string]string, error) {
	out := map[string]string{}
	err := scanPrefix(r, prefix, func(k, v []byte) error {
		out[string(k[len(prefix):])] = string(v)
		return nil
	})
	return out, err
}

// hashes is the content hash of each indexed file (read from its record)
// and the reason of each skipped one: of paths, or of every file when there
// are none.
func (c *codeReader) hashes(paths []string) (hashes, skipped map[string]string, err error) {
	hashes, skipped = map[string]string{}, map[string]string{}
	if len(paths) > 0 {
		for _, p := range paths {
			f, err := getFrom(c.r, codeFileKey(c.rid, p))
			if err == nil && f != nil {
				hashes[p], err = codeFileHash(f)
			}
			if err != nil {
				return nil, nil, err
			}
			v, err := getFrom(c.r, codeSkipKey(c.rid, p))
			if err != nil {
				return nil, nil, err
			}
			if v != nil {
				skipped[p] = string(v)
			}
		}
		return hashes, skipped, nil
	}
	prefix := codeFilesPrefix(c.rid)
	err = scanPrefix(c.r, prefix, func(k, v []byte) error {
		h, err := codeFileHash(v)
		hashes[string(k[len(prefix):])] = h
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	skipped, err = readMap(c.r, codeSkipsPrefix(c.rid))
	return hashes, skipped, err
}
