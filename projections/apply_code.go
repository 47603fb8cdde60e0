package projections

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// The code index: a fold of the Librarian's index_update events into a
// full-text index, symbols by name, calls by callee, imports by imported
// package and packages by import path, per work directory.
//
// Postings are kept per event (a segment): each term of the files an event
// indexed has one key per segment holding the postings of all of them, so a
// full index of 20,000 files writes tens of thousands of posting keys rather
// than millions. A file indexed again (or removed) leaves a tombstone in its
// old segment, which queries skip; a segment whose files are all dead is
// deleted whole. A file's record keeps its other keys, so a new version
// deletes exactly those.

// CodeFile is one indexed file as the code index keeps it: what the event
// said of it but its terms (they are in the postings).
type CodeFile struct {
	schemas.IndexedFile
	// Length is the number of terms with repeats (BM25's document length).
	Length int `json:"length"`
	// Seq is the event that indexed this version: its segment.
	Seq uint64 `json:"seq"`
}

// codeRoot is the totals of one work directory's index that BM25 needs.
type codeRoot struct {
	Root   string `json:"root"`
	Files  int    `json:"files"`
	Length int64  `json:"length"`
	Seq    uint64 `json:"seq"`
	// Skips: a file of this directory was ever skipped. Until one is, an
	// indexed file has no skip record to delete.
	Skips bool `json:"skips,omitempty"`
}

// codeSegment is what the fold remembers of a segment: the names of its
// lists (to delete their keys when the segment dies) and how many of its
// files are still live.
type codeSegment struct {
	Names    []string `json:"names"`
	Imports  []string `json:"imports,omitempty"`
	Packages []string `json:"packages,omitempty"`
	Live     int      `json:"live"`
}

// A segment's lists, one key per name and segment: a name's (a term's
// postings, the symbols it names and the calls to it, lower-cased), an
// import's and a package's. A list's value is the entries of the
// segment's files (uvarints, each starting with the file's index in the
// segment), in sections when it has several (see segmentLists.value). A
// posting is the file's index and the term's count: the file's length,
// which BM25 needs too, is written once, with the segment's paths (see
// segmentPaths). A symbol's name and a callee's are most often terms of
// the same file: one key holds them all.
var (
	codeNameLists    = codeListKind{"code/t/", func(s *codeSegment) *[]string { return &s.Names }, 3}
	codeImportLists  = codeListKind{"code/i/", func(s *codeSegment) *[]string { return &s.Imports }, 1}
	codePackageLists = codeListKind{"code/p/", func(s *codeSegment) *[]string { return &s.Packages }, 1}
	codeListKinds    = [...]codeListKind{codeNameLists, codeImportLists, codePackageLists}

	codeTermFamily    = codeFamily{codeNames, 0, 1}
	codeSymbolFamily  = codeFamily{codeNames, 1, 1}
	codeCallFamily    = codeFamily{codeNames, 2, 1}
	codeImportFamily  = codeFamily{codeImports, 0, 0}
	codePackageFamily = codeFamily{codePackages, 0, 0}
)

// Indexes of codeListKinds (and of codeLists.lists).
const (
	codeNames = iota
	codeImports
	codePackages
)

// codeListKind is a kind of a segment's lists: its key prefix, where the
// segment record keeps its names, and how many sections its values have.
type codeListKind struct {
	prefix   string
	names    func(*codeSegment) *[]string
	sections int
}

func (k codeListKind) listPrefix(rid, name string) []byte { return under(key(k.prefix, rid, name)) }

// codeFamily is one kind of entry: the lists holding it (an index of
// codeListKinds), their section it is in, and how many values follow the
// file's index in an entry.
type codeFamily struct {
	kind, sec, values int
}

func (f codeFamily) lists() codeListKind { return codeListKinds[f.kind] }

// section is f's section of v, the value of one of its lists.
func (f codeFamily) section(v []byte) ([]byte, error) {
	return sectionOf(v, f.lists().sections, f.sec)
}

// segmentLists gathers one kind's lists of a segment while its files are
// folded: one map lookup per entry. It is reused from one event to the
// next (see codeScratches), its map and lists keeping their room.
type segmentLists struct {
	slot     map[string]int32
	names    []string
	sections int      // of each list
	vals     [][]byte // list k's section s at k*sections+s
	buf      []byte   // a value being written
	lower    []byte   // a name being lower-cased (addLower)
}

// reset empties l for the next segment, whose lists have sections
// sections. Its names went into the last segment's record: the next ones
// get a slice of their own.
func (l *segmentLists) reset(sections int) {
	clear(l.slot)
	l.names = make([]string, 0, len(l.names))
	l.vals = l.vals[:0]
	l.sections = sections
}

// add appends the entry xs (the file's index first) to section s of
// name's list.
func (l *segmentLists) add(name string, s int, xs ...uint64) {
	l.addAt(l.at(l.slotOf(name), s), xs...)
}

// addLower is add of name lower-cased (as strings.ToLower does): the
// name is lower-cased into a buffer, and made a string only when its list
// is new (most symbols and callees have capitals: a string each was an
// allocation a symbol and a call).
func (l *segmentLists) addLower(name string, s int, xs ...uint64) {
	b := l.lower[:0]
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 0x80 {
			l.add(strings.ToLower(name), s, xs...)
			return
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	l.lower = b
	k, ok := l.slot[string(b)]
	if !ok {
		k = l.slotOf(string(b))
	}
	l.addAt(l.at(k, s), xs...)
}

// at is where section s of the list at index k is in vals.
func (l *segmentLists) at(k int32, s int) int32 { return k*int32(l.sections) + int32(s) }

// slotOf is the index of name's list, made empty when it has none.
func (l *segmentLists) slotOf(name string) int32 {
	k, ok := l.slot[name]
	if ok {
		return k
	}
	if l.slot == nil {
		l.slot = map[string]int32{}
	}
	k = int32(len(l.names))
	l.slot[name] = k
	l.names = append(l.names, name)
	for range l.sections {
		if n := len(l.vals); n < cap(l.vals) {
			l.vals = l.vals[:n+1]
			l.vals[n] = l.vals[n][:0]
		} else {
			l.vals = append(l.vals, nil)
		}
	}
	return k
}

// addAt appends the entry xs to the section at index k of vals.
func (l *segmentLists) addAt(k int32, xs ...uint64) {
	for _, x := range xs {
		l.vals[k] = binary.AppendUvarint(l.vals[k], x)
	}
}

// value is list k's value: its sections in order, each but the last of
// its kind after its length (a uvarint). Empty sections at the end are
// left out (most lists of names hold postings alone): sectionOf reads
// them as empty.
func (l *segmentLists) value(k int) []byte {
	secs := l.vals[k*l.sections : (k+1)*l.sections]
	if len(secs) == 1 {
		return secs[0]
	}
	for len(secs) > 0 && len(secs[len(secs)-1]) == 0 {
		secs = secs[:len(secs)-1]
	}
	b := l.buf[:0]
	for i, sec := range secs {
		if i < l.sections-1 {
			b = binary.AppendUvarint(b, uint64(len(sec)))
		}
		b = append(b, sec...)
	}
	l.buf = b
	return b
}

// errCorruptSection: a list's value whose section lengths overrun it.
var errCorruptSection = errors.New("a section longer than the list holds")

// sectionOf is section s of v, the value of a list of sections sections
// (see segmentLists.value).
func sectionOf(v []byte, sections, s int) ([]byte, error) {
	for i := 0; i < sections-1; i++ {
		if len(v) == 0 {
			return nil, nil // left out: empty
		}
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return nil, errCorruptSection
		}
		if i == s {
			return v[w : w+int(n)], nil
		}
		v = v[w+int(n):]
	}
	return v, nil
}

// write stores the lists under kind's keys of segment seq and their names
// in seg, in the order they were first met (an order a rebuild repeats:
// it folds the same event).
func (l *segmentLists) write(t *tx, kind codeListKind, rid string, seq uint64, seg *codeSegment) error {
	for k, name := range l.names {
		key := append(t.kbuf[:0], kind.prefix...)
		key = append(append(key, rid...), sep)
		key = append(append(key, name...), sep)
		t.kbuf = binary.BigEndian.AppendUint64(key, seq)
		if err := t.set(t.kbuf, l.value(k)); err != nil {
			return err
		}
	}
	*kind.names(seg) = l.names
	return nil
}

// codeLists are the lists of one segment, by kind (as codeListKinds), the
// counts of the file being folded, the list of each term of the event's
// vocabulary, and its files' term refs as checkIndexUpdate parsed them.
type codeLists struct {
	lists  [len(codeListKinds)]segmentLists
	counts []termCount
	vocab  []int32 // a list's index, or vocabUnseen or vocabInvalid
	refs   fileRefs
}

// fileRefs are the term refs of an update's files, parsed once (by the
// check every event passes before it is applied): file i's are
// refs[ends[i-1]:ends[i]].
type fileRefs struct {
	refs []termRef
	ends []int
}

// termRef is a term's number in the update's vocabulary and its count in
// a file.
type termRef struct{ id, n uint64 }

// of is file i's refs.
func (r *fileRefs) of(i int) []termRef {
	start := 0
	if i > 0 {
		start = r.ends[i-1]
	}
	return r.refs[start:r.ends[i]]
}

// A vocabulary term's list before a file names it, and of a term that is
// not one.
const (
	vocabUnseen  = -1
	vocabInvalid = -2
)

// termCount is a term of a file (its list's index) and its count.
type termCount struct {
	list int32
	n    int
}

// codeScratches keeps codeLists from one index_update to the next: a
// segment's terms number thousands, and a map grown from empty for each
// was a fifth of the fold.
var codeScratches = sync.Pool{New: func() any { return new(codeLists) }}

// RootID names a work directory in the code index's keys: the first 8 bytes
// of the SHA-256 of its absolute path, in hex.
func RootID(root string) string {
	h := sha256.Sum256([]byte(root))
	return hex.EncodeToString(h[:8])
}

func applyCode(t *tx, ev *event) error {
	env := ev.env
	if env == nil || env.Type != schemas.TypeIndexUpdate {
		return nil
	}
	p, err := payloadOf[schemas.IndexUpdate](t, Code, ev)
	if p == nil {
		return err
	}
	// The vocabulary's terms: a file's refs name them by number.
	var vocab []string
	if p.Vocab != "" {
		vocab = strings.Split(p.Vocab, " ")
	}
	scratch := codeScratches.Get().(*codeLists)
	defer codeScratches.Put(scratch)
	if reason := checkIndexUpdate(p, len(vocab), &scratch.refs); reason != "" {
		return t.reject(Code, ev, "%s", reason)
	}
	rid := RootID(p.Root)
	rk := codeRootKey(rid)
	r, err := load[codeRoot](t, rk)
	if err != nil {
		return err
	}
	if r == nil {
		r = &codeRoot{Root: p.Root}
	}
	r.Seq = ev.seq
	for _, pth := range p.Removed {
		if err := dropCodeFile(t, rid, pth, r); err != nil {
			return err
		}
		if err := t.batch.Delete(codeSkipKey(rid, pth), nil); err != nil {
			return err
		}
	}
	for _, s := range p.Skipped {
		if err := dropCodeFile(t, rid, s.Path, r); err != nil {
			return err
		}
		r.Skips = true
		if err := t.set(codeSkipKey(rid, s.Path), []byte(s.Reason)); err != nil {
			return err
		}
	}
	if len(p.Files) == 0 {
		store(t, rk, r)
		return nil
	}
	// The segment: each term's postings (the file's index in the segment,
	// its count) and each symbol's (index, line), callee's (index, the
	// call's index in the file), import's and package's (index); its
	// files' paths and lengths.
	lists := &scratch.lists
	for k := range lists {
		lists[k].reset(codeListKinds[k].sections)
	}
	if err := prefetchCodeFiles(t, rid, p.Files); err != nil {
		return err
	}
	scratch.vocab = slices.Grow(scratch.vocab[:0], len(vocab))[:len(vocab)]
	for k := range scratch.vocab {
		scratch.vocab[k] = vocabUnseen
	}
	names := &lists[codeNames]
	var paths segmentPaths
	paths.grow(len(p.Files))
	counts := scratch.counts[:0]
	defer func() { scratch.counts = counts[:0] }()
	for i := range p.Files {
		f := &p.Files[i]
		if err := dropCodeFile(t, rid, f.Path, r); err != nil {
			return err
		}
		if r.Skips {
			if err := t.batch.Delete(codeSkipKey(rid, f.Path), nil); err != nil {
				return err
			}
		}
		length := 0
		counts = counts[:0]
		for _, ref := range scratch.refs.of(i) {
			k := scratch.vocab[ref.id]
			if k == vocabUnseen {
				k = vocabInvalid
				if validTerm(vocab[ref.id]) {
					k = names.slotOf(vocab[ref.id])
				}
				scratch.vocab[ref.id] = k
			}
			if ref.n > 0 && k >= 0 {
				length += int(ref.n)
				counts = append(counts, termCount{k, int(ref.n)})
			}
		}
		// checkIndexUpdate has read this format too: it parses.
		_ = schemas.ParseTerms(f.Terms, func(term string, n int) { // the format before TermRefs
			if n > 0 && validTerm(term) {
				length += n
				counts = append(counts, termCount{names.slotOf(term), n})
			}
		})
		idx := uint64(i)
		for _, tc := range counts {
			names.addAt(names.at(tc.list, codeTermFamily.sec), idx, uint64(tc.n))
		}
		for _, s := range f.Symbols {
			names.addLower(s.Name, codeSymbolFamily.sec, idx, uint64(s.Line))
		}
		for k, c := range f.Calls {
			names.addLower(calleeTail(c.To), codeCallFamily.sec, idx, uint64(k))
		}
		for _, imp := range f.Imports {
			lists[codeImports].add(imp, 0, idx)
		}
		if f.Package != "" {
			lists[codePackages].add(f.Package, 0, idx)
		}
		paths.add(f.Path, length)
		if err := putCodeFile(t, rid, f, length, ev.seq, r); err != nil {
			return err
		}
	}
	seg := &codeSegment{Live: len(p.Files)}
	for k, kind := range codeListKinds {
		if err := lists[k].write(t, kind, rid, ev.seq, seg); err != nil {
			return err
		}
	}
	if err := t.set(codeSegmentPathsKey(rid, ev.seq), paths.value()); err != nil {
		return err
	}
	store(t, codeSegmentKey(rid, ev.seq), seg)
	store(t, rk, r)
	return nil
}

// segmentPaths is the value of a segment's paths key: its files' paths,
// one a line, then a NUL (no path holds one) and each file's length (the
// number of its terms with repeats), uvarints in the same order. A
// search reads it once a segment, rather than a length in each posting.
type segmentPaths struct {
	paths, lengths []byte
}

func (s *segmentPaths) grow(files int) {
	s.paths = make([]byte, 0, 32*files)
	s.lengths = make([]byte, 0, 2*files)
}

// add appends a file's path and length.
func (s *segmentPaths) add(pth string, length int) {
	if len(s.paths) > 0 {
		s.paths = append(s.paths, '\n')
	}
	s.paths = append(s.paths, pth...)
	s.lengths = binary.AppendUvarint(s.lengths, uint64(length))
}

func (s *segmentPaths) value() []byte { return append(append(s.paths, 0), s.lengths...) }

// checkIndexUpdate is why p, whose vocabulary holds words terms, cannot be
// applied, or "". It is read whole before anything is applied, so that a
// refused event changes nothing; its files' term refs are left in refs.
func checkIndexUpdate(p *schemas.IndexUpdate, words int, refs *fileRefs) string {
	refs.refs, refs.ends = refs.refs[:0], refs.ends[:0]
	if !path.IsAbs(p.Root) {
		return "root " + quote(p.Root) + " is not an absolute path"
	}
	check := func(what, pth string) string {
		if pth == "" || strings.ContainsRune(pth, 0) || path.IsAbs(pth) || path.Clean(pth) != pth || strings.HasPrefix(pth, "../") || pth == ".." {
			return what + " path " + quote(pth) + " is not a clean path relative to the root"
		}
		return ""
	}
	seen := map[string]bool{}
	once := func(pth string) string {
		if seen[pth] {
			return "path " + quote(pth) + " is named twice"
		}
		seen[pth] = true
		return ""
	}
	for _, f := range p.Files {
		if r := cmp.Or(check("file", f.Path), once(f.Path)); r != "" {
			return r
		}
		if f.Hash == "" {
			return "file " + quote(f.Path) + " has no content hash"
		}
		if err := checkTerms(&f, words, refs); err != nil {
			return "file " + quote(f.Path) + ": " + err.Error()
		}
	}
	for _, r := range p.Removed {
		if why := cmp.Or(check("removed", r), once(r)); why != "" {
			return why
		}
	}
	for _, s := range p.Skipped {
		if why := cmp.Or(check("skipped", s.Path), once(s.Path)); why != "" {
			return why
		}
	}
	return ""
}

// checkTerms is why f's terms (in either format) cannot be read, with a
// vocabulary of words terms, or nil; it appends f's term refs to refs.
func checkTerms(f *schemas.IndexedFile, words int, refs *fileRefs) error {
	var bad error
	err := schemas.ParseTermRefs(f.TermRefs, func(id, n uint64) {
		switch {
		case bad != nil:
		case id >= uint64(words):
			bad = fmt.Errorf("term %d is past the vocabulary's %d terms", id, words)
		case n > math.MaxInt32:
			bad = fmt.Errorf("term %d counts %d, more than a file can hold", id, n)
		default:
			refs.refs = append(refs.refs, termRef{id, n})
		}
	})
	refs.ends = append(refs.ends, len(refs.refs))
	return cmp.Or(err, bad, schemas.ParseTerms(f.Terms, func(string, int) {}))
}

func quote(s string) string { return "\"" + s + "\"" }

// dropCodeFile deletes every key of the indexed file at pth, if there is
// one, and leaves a tombstone in its segment (or deletes the segment when
// it was the last live file of it).
func dropCodeFile(t *tx, rid, pth string, r *codeRoot) error {
	fk := codeFileKey(rid, pth)
	old, err := loadWith(t, fk, decodeCodeFile)
	if err != nil || old == nil {
		return err
	}
	b := t.batch
	if err := b.Delete(codeEmbedKey(rid, pth), nil); err != nil {
		return err
	}
	sk := codeSegmentKey(rid, old.Seq)
	seg, err := load[codeSegment](t, sk)
	if err != nil {
		return err
	}
	switch {
	case seg == nil: // cannot happen: the file's event wrote it
	case seg.Live <= 1:
		for _, kind := range codeListKinds {
			for _, name := range *kind.names(seg) {
				if err := b.Delete(binary.BigEndian.AppendUint64(kind.listPrefix(rid, name), old.Seq), nil); err != nil {
					return err
				}
			}
		}
		dead := codeDeadPrefix(rid, old.Seq)
		if err := b.DeleteRange(dead, prefixEnd(dead), nil); err != nil {
			return err
		}
		if err := b.Delete(codeSegmentPathsKey(rid, old.Seq), nil); err != nil {
			return err
		}
		store[codeSegment](t, sk, nil)
	default:
		seg.Live--
		store(t, sk, seg)
		if err := t.set(append(codeDeadPrefix(rid, old.Seq), pth...), nil); err != nil {
			return err
		}
	}
	r.Files--
	r.Length -= int64(old.Length)
	store[CodeFile](t, fk, nil)
	return nil
}

// prefetchCodeFiles reads the records of files that the cache does not
// hold in one pass of one iterator, in key order, and caches each (or that
// there is none), so dropCodeFile finds them there: a lookup of its own for
// each file was a twentieth of a first index's CPU, though a first index
// finds none. What Pebble holds of a key the cache does not is its latest
// value, as load relies on: nothing is evicted while a flushed batch waits
// for its commit.
func prefetchCodeFiles(t *tx, rid string, files []schemas.IndexedFile) error {
	keys := make([][]byte, 0, len(files))
	for i := range files {
		k := codeFileKey(rid, files[i].Path)
		if _, ok := t.cache.m[string(k)]; !ok && !t.knownAbsent(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) < 2 {
		return nil // load's lookup costs no more
	}
	slices.SortFunc(keys, bytes.Compare)
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: keys[0], UpperBound: prefixEnd(codeFilesPrefix(rid))})
	if err != nil {
		return err
	}
	it.SeekGE(keys[0])
	for _, k := range keys {
		// Past its end, the iterator holds no key from k on.
		if it.Valid() && bytes.Compare(it.Key(), k) < 0 {
			it.SeekGE(k)
		}
		var raw []byte
		if it.Valid() && bytes.Equal(it.Key(), k) {
			if raw, err = it.ValueAndErr(); err != nil {
				it.Close()
				return err
			}
		}
		if _, err := loadedWith(t, k, raw, decodeCodeFile); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// putCodeFile writes the keys of f but its postings.
func putCodeFile(t *tx, rid string, f *schemas.IndexedFile, length int, seq uint64, r *codeRoot) error {
	cf := &CodeFile{IndexedFile: *f, Length: length, Seq: seq}
	cf.Terms, cf.TermRefs = "", nil
	if f.EmbedHash != "" {
		// Labelled with the language, so a search's language filter is
		// applied inside the vector search.
		if err := t.set(codeEmbedKey(rid, f.Path), vectorListing(f.EmbedHash, f.Lang)); err != nil {
			return err
		}
	}
	r.Files++
	r.Length += int64(length)
	store(t, codeFileKey(rid, f.Path), cf)
	return nil
}

func validTerm(t string) bool { return t != "" && len(t) <= maxTermLen && !strings.ContainsRune(t, 0) }

// calleeName is the name a call is filed under: the callee's last
// identifier, lower-cased ("github.com/x/y.Parse" and "?.Parse": "parse").
func calleeName(to string) string { return strings.ToLower(calleeTail(to)) }

// calleeTail is the callee's last identifier, as written.
func calleeTail(to string) string {
	if i := strings.LastIndexByte(to, '.'); i >= 0 {
		to = to[i+1:]
	}
	return to
}

// Keys of the code index (see the package comment).
func codeRootKey(rid string) []byte                { return key("code/r/", rid) }
func codeFileKey(rid, pth string) []byte           { return key("code/f/", rid, pth) }
func codeFilesPrefix(rid string) []byte            { return under(key("code/f/", rid)) }
func codeEmbedKey(rid, pth string) []byte          { return key("code/e/", rid, pth) }
func codeEmbedsPrefix(rid string) []byte           { return under(key("code/e/", rid)) }
func codeSkipKey(rid, pth string) []byte           { return key("code/s/", rid, pth) }
func codeSkipsPrefix(rid string) []byte            { return under(key("code/s/", rid)) }
func codeSegmentKey(rid string, seg uint64) []byte { return withSeq(key("code/g/", rid), seg) }
func codeSegmentPathsKey(rid string, seg uint64) []byte {
	return withSeq(key("code/gp/", rid), seg)
}
func codeDeadPrefix(rid string, seg uint64) []byte { return under(withSeq(key("code/d/", rid), seg)) }

func appendIntField(b []byte, k string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}
