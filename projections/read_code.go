package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

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
	// RankHybrid fuses the BM25 ranking with the vector ranking by
	// reciprocal rank (each file scores the sum of 1/(60+rank) over both).
	RankHybrid = "hybrid"
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
	// Lexical is the BM25 score and Similarity the cosine similarity to
	// the query's vector, of a hybrid search (Score is then the fused one).
	Lexical    float64 `json:"lexical,omitempty"`
	Similarity float64 `json:"similarity,omitempty"`
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
	c := &codeReader{r: snap, rid: RootID(q.Root), files: map[string]*CodeFile{}, segments: map[uint64]*segment{}, vectors: &s.vectors}
	out := &CodeResult{Root: q.Root}
	root, err := c.root()
	if err != nil || root == nil {
		return out, err
	}
	out.Indexed = true
	switch q.Kind {
	case CodeSearch:
		err = c.search(root, &q, out)
	case CodeSymbol:
		out.Symbols, err = c.symbols(q.Text, q.Limit)
	case CodeCallers:
		out.Calls, err = c.callers(q.Text, q.Limit)
	case CodeCallees:
		out.Calls, err = c.callees(q.Text, q.Limit)
	case CodeDeps:
		out.Packages, err = c.deps(q.Text)
	case CodeDependents:
		out.Packages, err = c.dependents(q.Text)
	case CodeHealth:
		out.Health, err = c.health(q.Text)
	case CodeStatus:
		out.Status, err = c.status(root, q.Limit)
	case CodeHashes:
		out.Hashes, out.Skipped, err = c.hashes()
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
	r        pebble.Reader
	rid      string
	files    map[string]*CodeFile
	segments map[uint64]*segment
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
	f := &CodeFile{}
	if err := json.Unmarshal(v, f); err != nil {
		return nil, fmt.Errorf("decode code file %q: %w", pth, err)
	}
	c.files[pth] = f
	return f, nil
}

// lastPart is the text after k's last separator.
func lastPart(k []byte) string {
	return string(k[bytes.LastIndexByte(k, sep)+1:])
}

// segment is a segment's paths and its dead files, read once per query.
type segment struct {
	paths []string
	dead  map[string]bool
}

func (c *codeReader) segment(seq uint64) (*segment, error) {
	if g, ok := c.segments[seq]; ok {
		return g, nil
	}
	v, err := getFrom(c.r, codeSegmentPathsKey(c.rid, seq))
	if err != nil {
		return nil, err
	}
	g := &segment{paths: strings.Split(string(v), "\n")}
	prefix := codeDeadPrefix(c.rid, seq)
	err = scanPrefix(c.r, prefix, func(k, _ []byte) error {
		if g.dead == nil {
			g.dead = map[string]bool{}
		}
		g.dead[string(k[len(prefix):])] = true
		return nil
	})
	c.segments[seq] = g
	return g, err
}

// search ranks files by BM25 over the query's terms; df is counted while the
// postings are read, so it needs no counters of its own.
func (c *codeReader) search(root *codeRoot, q *CodeQuery, out *CodeResult) error {
	terms, err := queryTerms("code", q.Text)
	if err != nil {
		return err
	}
	avgdl := float64(root.Length) / float64(max(root.Files, 1))
	hits, unknown, err := rankBM25(terms, root.Files, avgdl, func(term string, add func(posting)) error {
		prefix := codeTermPrefix(c.rid, term)
		return scanPrefix(c.r, prefix, func(k, v []byte) error {
			g, err := c.segment(binary.BigEndian.Uint64(k[len(prefix):]))
			if err != nil {
				return err
			}
			for len(v) > 0 {
				var x [3]uint64
				for j := range x {
					n := 0
					x[j], n = binary.Uvarint(v)
					if n <= 0 {
						return fmt.Errorf("code: a corrupt posting list at %q", k)
					}
					v = v[n:]
				}
				if x[0] >= uint64(len(g.paths)) {
					return fmt.Errorf("code: a posting of file %d in a segment of %d at %q", x[0], len(g.paths), k)
				}
				if p := g.paths[x[0]]; !g.dead[p] {
					add(posting{id: p, tf: int(x[1]), dl: int(x[2])})
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	out.Unknown = unknown
	hits, out.Ranking, out.Vectors, err = c.vectors.rerank(c.r, codeEmbedsPrefix(c.rid), root.Seq, q.Embedding, q.Limit, hits)
	if err != nil {
		return err
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
		for _, sym := range f.Symbols {
			named := false
			Terms(sym.Name, func(t string) { named = named || slices.Contains(terms, t) })
			if named {
				hits[i].Symbols = append(hits[i].Symbols, CodeSymbolHit{Symbol: sym, Path: f.Path, Package: f.Package})
			}
		}
	}
	out.Hits = hits
	return nil
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

// posting is a term's count in a text (a file, a chunk) of length dl.
type posting struct {
	id     string
	tf, dl int
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
			scores[p.id] += bm25(p.tf, p.dl, len(ps), n, avgdl)
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

// fuse merges the BM25 ranking (lexical, best first) with the vector
// ranking (near, nearest first) by reciprocal rank.
func fuse(lexical []CodeHit, near []vectorHit) []CodeHit {
	// The capacity holds every hit, so the pointers in byPath stay valid.
	out := make([]CodeHit, 0, len(lexical)+len(near))
	byPath := make(map[string]*CodeHit, len(lexical)+len(near))
	for i, h := range lexical {
		out = append(out, CodeHit{Path: h.Path, Lexical: h.Score, Score: 1 / float64(rrfK+i+1)})
		byPath[h.Path] = &out[len(out)-1]
	}
	for i, n := range near {
		h := byPath[n.path]
		if h == nil {
			out = append(out, CodeHit{Path: n.path})
			h = &out[len(out)-1]
		}
		h.Similarity = float64(n.sim)
		h.Score += 1 / float64(rrfK+i+1)
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
// element).
func (c *codeReader) symbols(name string, limit int) ([]CodeSymbolHit, error) {
	qual, last := splitSymbol(strings.TrimSpace(name))
	var out []CodeSymbolHit
	err := scanPrefix(c.r, codeSymbolPrefix(c.rid, last), func(k, _ []byte) error {
		if len(out) >= limit {
			return nil
		}
		rest := k[len(codeSymbolPrefix(c.rid, last)):]
		pth := string(rest[:bytes.IndexByte(rest, sep)])
		line := int(binary.BigEndian.Uint32(rest[len(rest)-4:]))
		f, err := c.file(pth)
		if err != nil || f == nil {
			return err
		}
		for _, sym := range f.Symbols {
			if sym.Line == line && strings.EqualFold(sym.Name, last) && symbolQualifies(qual, sym.Recv, f.Package) {
				out = append(out, CodeSymbolHit{Symbol: sym, Path: pth, Package: f.Package})
			}
		}
		return nil
	})
	return out, err
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

// callers lists the calls to name. A qualified name ("pkg.Func",
// "Recv.Method") keeps calls whose callee has that qualifier, and calls of a
// method on a value of unresolved type ("?.Method").
func (c *codeReader) callers(name string, limit int) ([]CodeCall, error) {
	qual, last := splitSymbol(strings.TrimSpace(name))
	prefix := codeCallPrefix(c.rid, calleeName(last))
	var out []CodeCall
	err := scanPrefix(c.r, prefix, func(k, _ []byte) error {
		if len(out) >= limit {
			return nil
		}
		rest := k[len(prefix):]
		pth := string(rest[:bytes.IndexByte(rest, sep)])
		i := int(binary.BigEndian.Uint32(rest[len(rest)-4:]))
		f, err := c.file(pth)
		if err != nil || f == nil || i >= len(f.Calls) {
			return err
		}
		call := f.Calls[i]
		cq, cl := splitSymbol(call.To)
		if cl != last || qual != "" && cq != "?" && cq != qual && !strings.HasSuffix(cq, "/"+qual) && !strings.EqualFold(cq, qual) {
			return nil
		}
		out = append(out, CodeCall{Call: call, Path: pth, Package: f.Package})
		return nil
	})
	return out, err
}

// callees lists the calls made by the functions or methods named name.
func (c *codeReader) callees(name string, limit int) ([]CodeCall, error) {
	defs, err := c.symbols(name, 1<<20)
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

// packageFiles lists the files of pkg: an import path, or the last elements
// of one when that names a single package.
func (c *codeReader) packageFiles(pkg string) ([]string, error) {
	var files []string
	collect := func(p []byte) error {
		return scanPrefix(c.r, p, func(k, _ []byte) error {
			files = append(files, lastPart(k))
			return nil
		})
	}
	if err := collect(codePackagePrefix(c.rid, pkg)); err != nil || len(files) > 0 {
		return files, err
	}
	var matches []string
	err := scanPrefix(c.r, under(key("code/p/", c.rid)), func(k, _ []byte) error {
		rest := k[len(under(key("code/p/", c.rid))):]
		p := string(rest[:bytes.IndexByte(rest, sep)])
		if strings.HasSuffix(p, "/"+pkg) && !slices.Contains(matches, p) {
			matches = append(matches, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch len(matches) {
	case 0:
		return nil, fmt.Errorf("package %q: %w", pkg, ErrNotFound)
	case 1:
		return files, collect(codePackagePrefix(c.rid, matches[0]))
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
	var out []string
	err := scanPrefix(c.r, codeImportPrefix(c.rid, imp), func(k, _ []byte) error {
		f, err := c.file(lastPart(k))
		if err != nil || f == nil {
			return err
		}
		if f.Package != "" {
			out = append(out, f.Package)
		} else {
			out = append(out, f.Path)
		}
		return nil
	})
	return dedup(out), err
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
		f := &CodeFile{}
		if err := json.Unmarshal(v, f); err != nil {
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
	return readMap(c.r, codeEmbedsPrefix(c.rid))
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

func (c *codeReader) hashes() (hashes, skipped map[string]string, err error) {
	if hashes, err = readMap(c.r, codeHashesPrefix(c.rid)); err != nil {
		return nil, nil, err
	}
	skipped, err = readMap(c.r, codeSkipsPrefix(c.rid))
	return hashes, skipped, err
}
