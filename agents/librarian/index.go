package librarian

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Defaults of the indexer.
const (
	// DefaultMaxFileSize: larger files are skipped (generated code, data
	// dumps, minified bundles say nothing a search should find).
	DefaultMaxFileSize = 1 << 20
	// DefaultBatchBytes bounds the estimated size of one index_update event.
	DefaultBatchBytes = 512 << 10
	// binarySniff is how much of a file is looked at for a NUL byte.
	binarySniff = 8000
	// CommandGCPercent is the GCPercent of a command's scan of the tree.
	// A first index allocates about 14 KB a file (the file's text, its
	// terms and symbols, the event's encodings on their way through the
	// server and back to the fold) and keeps little of it: in a process's
	// first index of the 20,000-file tree the collector ran 9-11 times at
	// the default GOGC (100), 6-7 at 200, and 2 instead of 3-5 in the
	// next ones (GODEBUG=gctrace=1). With the scan's updates no longer
	// kept, BenchmarkIndexTree gave 32.6 µs of CPU a file against 34.0
	// (means of 9 pairs alternated with the code before both, load
	// 1.7-4.5). The heap peaks near three
	// times what the scan holds live (the pipeline's files in flight and
	// the embedded server's buffers, about 50 MB, not the tree's).
	CommandGCPercent = 200
)

// skippedDirs are directories the indexer never enters: version control,
// dependencies and caches.
var skippedDirs = map[string]bool{
	".git": true, ".hg": true, ".svn": true, "node_modules": true, "vendor": true,
	"__pycache__": true, ".venv": true, ".idea": true, ".vscode": true, ".cache": true,
}

// Indexer extracts what the code index records from the files of one work
// directory. It reads files and nothing else: the caller records the
// updates it returns as index_update events.
type Indexer struct {
	// Root is the work directory, absolute.
	Root string
	// Redactor removes secrets before anything is extracted (default: the
	// tools' built-in secret shapes).
	Redactor *tools.Redactor
	// MaxFileSize (default DefaultMaxFileSize) and BatchBytes (default
	// DefaultBatchBytes).
	MaxFileSize int64
	BatchBytes  int
	// Workers read and extract files in parallel (default GOMAXPROCS).
	Workers int
	// Reindex extracts every file again, whatever its hash, and records
	// every skip again (after an upgrade of the extractor).
	Reindex bool
	// GCPercent, when set, is the Go collector's GOGC while Update scans
	// the whole tree (projections.TuneGC), put back when it ends: the
	// process's setting, for a process that indexes (the sylk commands,
	// the bench), never a server's. See CommandGCPercent.
	GCPercent int

	mods sync.Map // dir -> module (the nearest go.mod's)
}

// NewIndexer returns an indexer of root (made absolute).
func NewIndexer(root string) (*Indexer, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("index %s: not a directory", root)
	}
	red, err := tools.NewRedactor(tools.SecretOptions{})
	if err != nil {
		return nil, err
	}
	return &Indexer{Root: filepath.ToSlash(abs), Redactor: red}, nil
}

func (ix *Indexer) maxSize() int64 {
	if ix.MaxFileSize > 0 {
		return ix.MaxFileSize
	}
	return DefaultMaxFileSize
}

// Known is what the index holds of the work directory: each file's content
// hash and each skipped file's reason (a CodeHashes query's answer).
type Known struct {
	Hashes  map[string]string
	Skipped map[string]string
}

// KnownFrom reads what r's index holds of root: of the files at paths
// (relative to root), or of every file when there are none.
func KnownFrom(ctx context.Context, r projections.Reader, root string, paths ...string) (Known, error) {
	res, err := r.Code(ctx, projections.CodeQuery{Root: root, Kind: projections.CodeHashes, Paths: paths})
	if err != nil {
		return Known{}, err
	}
	return Known{Hashes: res.Hashes, Skipped: res.Skipped}, nil
}

// Change is one file's outcome: indexed, skipped or gone.
type change struct {
	path    string
	read    bool // a walked file still to read
	file    *schemas.IndexedFile
	terms   projections.CountedTerms // the file's, for its update's vocabulary
	skip    string
	removed bool
}

// Scan walks the whole work directory and returns the updates that bring
// an index holding known up to date (ScanEach's, collected).
func (ix *Indexer) Scan(ctx context.Context, known Known) ([]schemas.IndexUpdate, error) {
	var out []schemas.IndexUpdate
	err := ix.ScanEach(ctx, known, func(u schemas.IndexUpdate) error {
		out = append(out, u)
		return nil
	})
	return out, err
}

// scanChunk is a run of walked entries one worker reads; done is closed
// when out holds their changes, whose terms are in counted.
type scanChunk struct {
	items   []change // a path to read, or the walk's own skip
	out     []change
	counted *projections.CountedBuffer
	done    chan struct{}
}

// scanChunkSize is how many walked entries a worker takes at a time.
const scanChunkSize = 32

// ScanEach walks the whole work directory and calls emit with each update
// that brings an index holding known up to date, as soon as it is made:
// files whose content hash changed or that are new, files newly skipped,
// and, last, files gone. The walk, the reading and the caller's recording
// of what was emitted run at the same time; the updates, and so their
// content-derived ids, depend only on the tree and known. Nothing on disk
// stops it: an unreadable directory or file is a skip with its reason. An
// error of emit stops the scan and is returned.
func (ix *Indexer) ScanEach(parent context.Context, known Known, emit func(schemas.IndexUpdate) error) error {
	ctx, cancel := context.WithCancel(parent)
	jobs := make(chan *scanChunk, 2*ix.workers())
	order := make(chan *scanChunk, 64)
	// free: the term buffers of chunks the batcher is done with, for the
	// workers' next chunks.
	free := make(chan *projections.CountedBuffer, cap(order)+cap(jobs))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // first: an early return stops the walk and the workers
	var walkErr error
	wg.Go(func() {
		defer close(order)
		defer close(jobs)
		walkErr = ix.walk(ctx, func(ch *scanChunk) bool {
			select {
			case order <- ch:
			case <-ctx.Done():
				return false
			}
			select {
			case jobs <- ch:
				return true
			case <-ctx.Done():
				close(ch.done)
				return false
			}
		})
	})
	for range ix.workers() {
		wg.Go(func() {
			w := new(extractState)
			for ch := range jobs {
				select {
				case ch.counted = <-free:
					ch.counted.Reset()
				default:
					ch.counted = new(projections.CountedBuffer)
				}
				w.counted = ch.counted
				ch.out = make([]change, len(ch.items))
				for i, c := range ch.items {
					switch {
					case ctx.Err() != nil:
					case c.read:
						ch.out[i] = ix.one(c.path, known, w)
					default:
						ch.out[i] = c
					}
				}
				// A directory is not kept from one chunk to the next:
				// one replaced since would be read as it was.
				w.dir.close()
				close(ch.done)
			}
		})
	}
	b := ix.newBatcher(known, emit)
	// seen: the known paths still there (the others are gone).
	seen := make(map[string]bool, len(known.Hashes)+len(known.Skipped))
	for ch := range order {
		<-ch.done
		if ch.out == nil {
			continue // the scan was cancelled before a worker took it
		}
		for i, c := range ch.items {
			if known.Hashes[c.path] != "" || known.Skipped[c.path] != "" {
				seen[c.path] = true
			}
			if err := b.add(ch.out[i]); err != nil {
				return err
			}
		}
		select {
		case free <- ch.counted:
		default:
		}
	}
	if walkErr != nil {
		return walkErr
	}
	if err := parent.Err(); err != nil {
		return err
	}
	var gone []string
	for p := range known.Hashes {
		if !seen[p] {
			gone = append(gone, p)
		}
	}
	for p := range known.Skipped {
		if !seen[p] && known.Hashes[p] == "" {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range gone {
		if err := b.add(change{path: p, removed: true}); err != nil {
			return err
		}
	}
	return b.flush()
}

// walk walks the work directory in lexical order and hands send its
// entries in chunks: the files to read and the walk's skips. It stops when
// send returns false.
func (ix *Indexer) walk(ctx context.Context, send func(*scanChunk) bool) error {
	// A chunk's items are made with room for all of them at once.
	newChunk := func() *scanChunk {
		return &scanChunk{items: make([]change, 0, scanChunkSize), done: make(chan struct{})}
	}
	ch := newChunk()
	stopped := false
	push := func(c change) error {
		ch.items = append(ch.items, c)
		if len(ch.items) < scanChunkSize {
			return nil
		}
		if !send(ch) {
			stopped = true
			return fs.SkipAll
		}
		ch = newChunk()
		return nil
	}
	err := filepath.WalkDir(ix.Root, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		rel := ix.rel(p)
		if err != nil {
			if rel != "." {
				if err := push(change{path: rel, skip: "unreadable: " + errText(err)}); err != nil {
					return err
				}
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			if rel != "." && skippedDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return push(change{path: rel, skip: "symlink (not followed, so links cannot loop)"})
		case !d.Type().IsRegular():
			return push(change{path: rel, skip: "not a regular file"})
		default:
			return push(change{path: rel, read: true})
		}
	})
	if err == nil && !stopped && len(ch.items) > 0 {
		send(ch)
	}
	return err
}

func (ix *Indexer) workers() int {
	if ix.Workers > 0 {
		return ix.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Paths re-indexes the named files only (a watcher's or an editor's news):
// each is indexed, skipped, or removed when it no longer exists.
func (ix *Indexer) Paths(ctx context.Context, known Known, paths []string) ([]schemas.IndexUpdate, error) {
	rels, err := ix.Rels(paths)
	if err != nil {
		return nil, err
	}
	var read []string
	var changes []change
	for _, rel := range rels {
		st, err := os.Lstat(filepath.Join(ix.Root, filepath.FromSlash(rel)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if known.Hashes[rel] != "" || known.Skipped[rel] != "" {
				changes = append(changes, change{path: rel, removed: true})
			}
		case err != nil:
			changes = append(changes, change{path: rel, skip: "unreadable: " + errText(err)})
		case st.IsDir():
			return nil, fmt.Errorf("%s is a directory: index it with Scan", rel)
		case st.Mode()&fs.ModeSymlink != 0:
			changes = append(changes, change{path: rel, skip: "symlink (not followed, so links cannot loop)"})
		case !st.Mode().IsRegular():
			// A FIFO's open would wait for a writer for ever.
			changes = append(changes, change{path: rel, skip: "not a regular file"})
		default:
			read = append(read, rel)
		}
	}
	changes = append(changes, ix.read(ctx, read, known)...)
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.path, b.path) })
	var out []schemas.IndexUpdate
	b := ix.newBatcher(known, func(u schemas.IndexUpdate) error {
		out = append(out, u)
		return nil
	})
	for _, c := range changes {
		if err := b.add(c); err != nil {
			return nil, err
		}
	}
	if err := b.flush(); err != nil {
		return nil, err
	}
	return out, ctx.Err()
}

// Rels are paths (absolute, or relative to the root) relative to the root,
// slash-separated, as the index names files; a path outside it is an error.
func (ix *Indexer) Rels(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		rel, err := ix.relOf(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// rel is p relative to the root, slash-separated.
func (ix *Indexer) rel(p string) string {
	r, err := filepath.Rel(filepath.FromSlash(ix.Root), p)
	if err != nil {
		return filepath.ToSlash(p)
	}
	return filepath.ToSlash(r)
}

// relOf is p (absolute, or relative to the root) relative to the root; a
// path outside it is an error.
func (ix *Indexer) relOf(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.FromSlash(ix.Root), p)
	}
	r := ix.rel(filepath.Clean(p))
	if r == "." || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(r) {
		return "", fmt.Errorf("%s is not a file under the work directory %s", p, ix.Root)
	}
	return r, nil
}

// read indexes paths in parallel. Unchanged files (same content hash as
// known) produce nothing.
func (ix *Indexer) read(ctx context.Context, paths []string, known Known) []change {
	workers := ix.workers()
	out := make([]change, len(paths))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range min(workers, max(len(paths), 1)) {
		wg.Go(func() {
			// The buffer is not reset: every change's terms are used
			// after the workers are done.
			w := &extractState{counted: new(projections.CountedBuffer)}
			defer w.dir.close()
			for ctx.Err() == nil {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= len(paths) {
					return
				}
				out[k] = ix.one(paths[k], known, w)
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(out, func(c change) bool { return c.path == "" })
}

// one indexes the file at rel; a zero change means it is unchanged.
func (ix *Indexer) one(rel string, known Known, w *extractState) change {
	fh, err := w.dir.openFile(ix.Root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		if known.Hashes[rel] != "" || known.Skipped[rel] != "" {
			return change{path: rel, removed: true} // vanished since the walk
		}
		return change{}
	}
	if err != nil {
		return change{path: rel, skip: "unreadable: " + errText(err)}
	}
	defer fh.close()
	// A file written while it is read is read again: what is indexed is a
	// version the file held, never a mix of two. A read is taken when the
	// stat after it has the size it got and a modification time from
	// before it started, or, for a file written lately (whose next write
	// may fall in the same tick of the file system's clock and leave its
	// time as it was), when two reads in a row got the same bytes and the
	// same stat after each (the first's was taken before the second
	// started).
	buf := w.buf[:0]
	defer func() { w.buf = buf[:0] }()
	var st, prevSt fileStat
	hash, prev := "", ""
	for attempt := 1; ; attempt++ {
		start := time.Now()
		buf, st, err = fh.readAll(buf, ix.maxSize())
		if err != nil {
			// A FIFO put where the walk saw a file may refuse the read
			// (no data yet): its stat says what it is.
			if st, serr := fh.stat(); serr == nil && !st.regular {
				return change{path: rel, skip: "not a regular file"}
			}
			return change{path: rel, skip: "unreadable: " + errText(err)}
		}
		switch {
		case !st.regular:
			return change{path: rel, skip: "not a regular file"}
		case st.size > ix.maxSize():
			return change{path: rel, skip: fmt.Sprintf("too large: %d bytes (the limit is %d)", st.size, ix.maxSize())}
		case int64(len(buf)) > ix.maxSize():
			return change{path: rel, skip: fmt.Sprintf("too large: more than %d bytes", ix.maxSize())}
		}
		hash = contentHash(buf)
		if int64(len(buf)) == st.size {
			if time.Unix(st.mtime.Unix()).Before(start.Add(-racyWindow)) || (hash == prev && st == prevSt) {
				break
			}
			prev, prevSt = hash, st
		} else {
			prev = ""
		}
		if attempt == maxReads {
			return change{path: rel, skip: fmt.Sprintf("changing while read (%d reads): indexed once it settles", maxReads)}
		}
		if err := fh.rewind(); err != nil {
			return change{path: rel, skip: "unreadable: " + errText(err)}
		}
	}
	if known.Hashes[rel] == hash && !ix.Reindex {
		return change{}
	}
	if bytes.IndexByte(buf[:min(len(buf), binarySniff)], 0) >= 0 {
		return change{path: rel, skip: "binary (a NUL byte in the first 8000 bytes)"}
	}
	f := ix.extract(rel, buf, hash, w)
	return change{path: rel, file: f, terms: w.terms.CountedInto(w.counted)}
}

// maxReads is how many times a file written while it is read is read;
// racyWindow is how lately a file must have been written for its stats
// not to be trusted alone (many ticks of a coarse file system clock).
const (
	maxReads   = 5
	racyWindow = 100 * time.Millisecond
)

// extract is what the index records of one file's content: a sensitive
// file only by name; any other after its secrets are redacted. Its terms
// are left counted in w.terms (the batcher refers to them in its update's
// vocabulary).
func (ix *Indexer) extract(rel string, content []byte, hash string, w *extractState) *schemas.IndexedFile {
	f := &schemas.IndexedFile{Path: rel, Hash: hash, Size: int64(len(content)), Lang: langOf(rel), Test: isTest(rel)}
	w.terms.Reset()
	// The path's terms count once: "config loader" finds config/loader.go.
	w.terms.CountOnce(rel)
	if _, ok := tools.SensitiveFile(rel); ok {
		f.Stubbed = true
		return f
	}
	text, n := ix.redact(string(content))
	f.Redactions = n
	f.EmbedHash = embedHash(rel, text, &w.text)
	f.Lines = countLines(text)
	f.Debt = countDebt(text)
	w.terms.Count(text)
	if f.Lang == "go" {
		extractGo(f, text, ix.goPackage(path.Dir(rel)), &w.lexer)
	}
	return f
}

// extractState is what a worker reuses from one file to the next.
type extractState struct {
	buf     []byte // the file read
	text    []byte // the text an embedding is made from
	terms   projections.TermCounter
	counted *projections.CountedBuffer // where each file's counted terms are copied
	lexer   goLexer
	dir     dirHandle // the directory of the file read last
}

// redact removes the secrets of text and says how many there were.
func (ix *Indexer) redact(text string) (string, int) {
	if ix.Redactor == nil {
		return text, 0
	}
	red := ix.Redactor.Redact(text)
	if red == text {
		return text, 0
	}
	repl := ix.Redactor.Replacement()
	return red, max(strings.Count(red, repl)-strings.Count(text, repl), 1)
}

// batcher groups changes into index_update events of about BatchBytes,
// in the order they come; a skip already recorded with the same reason is
// left out. The files' terms are numbered in the update's vocabulary.
type batcher struct {
	ix    *Indexer
	known Known
	emit  func(schemas.IndexUpdate) error
	limit int
	cur   schemas.IndexUpdate
	size  int
	vocab projections.TermVocab
	refs  []byte // the current update's files' TermRefs, end to end
}

func (ix *Indexer) newBatcher(known Known, emit func(schemas.IndexUpdate) error) *batcher {
	limit := ix.BatchBytes
	if limit <= 0 {
		limit = DefaultBatchBytes
	}
	return &batcher{ix: ix, known: known, emit: emit, limit: limit, cur: schemas.IndexUpdate{Root: ix.Root}}
}

// add adds c (nothing when it is a zero change: unchanged), emitting the
// current update when it is full.
func (b *batcher) add(c change) error {
	switch {
	case c.file != nil:
		start := len(b.refs)
		b.refs = b.vocab.AppendRefs(b.refs, c.terms)
		c.file.TermRefs = b.refs[start:len(b.refs):len(b.refs)]
		b.cur.Files = append(b.cur.Files, *c.file)
		b.size += estimate(c.file, c.terms)
	case c.removed:
		b.cur.Removed = append(b.cur.Removed, c.path)
		b.size += len(c.path)
	case c.skip != "" && (b.known.Skipped[c.path] != c.skip || b.ix.Reindex):
		b.cur.Skipped = append(b.cur.Skipped, schemas.IndexSkip{Path: c.path, Reason: c.skip})
		b.size += len(c.path) + len(c.skip)
	}
	if b.size >= b.limit {
		return b.flush()
	}
	return nil
}

// flush emits the current update, if it holds anything.
func (b *batcher) flush() error {
	u := b.cur
	u.Vocab = b.vocab.String()
	// The next update is likely to hold as many files: room for them and
	// their refs is made once rather than grown by copying.
	b.cur, b.size = schemas.IndexUpdate{Root: b.ix.Root}, 0
	if n := len(u.Files); n > 0 {
		b.cur.Files = make([]schemas.IndexedFile, 0, n)
		b.refs = make([]byte, 0, cap(b.refs))
	}
	b.vocab.Reset()
	if len(u.Files)+len(u.Removed)+len(u.Skipped) == 0 {
		return nil
	}
	return b.emit(u)
}

// estimate is about how many bytes f, whose terms are ts, takes in an
// event.
func estimate(f *schemas.IndexedFile, ts projections.CountedTerms) int {
	n := 64 + len(f.Path) + ts.Bytes()
	for _, s := range f.Symbols {
		n += 40 + len(s.Name) + len(s.Signature)
	}
	for _, c := range f.Calls {
		n += 20 + len(c.From) + len(c.To)
	}
	for _, i := range f.Imports {
		n += len(i) + 2
	}
	return n
}

// module is the Go module a directory belongs to.
type module struct {
	dir, path string // dir relative to the root ("." for the root)
}

// goPackage is the import path of the Go package in dir (relative to the
// root): the module path of the nearest go.mod at or above it, within the
// root, joined with the directory below it; the directory itself without
// one.
func (ix *Indexer) goPackage(dir string) string {
	m := ix.moduleOf(dir)
	if m.path == "" {
		return dir
	}
	if dir == m.dir {
		return m.path
	}
	if m.dir == "." {
		return m.path + "/" + dir
	}
	return m.path + "/" + strings.TrimPrefix(dir, m.dir+"/")
}

func (ix *Indexer) moduleOf(dir string) module {
	if v, ok := ix.mods.Load(dir); ok {
		return v.(module)
	}
	var m module
	if b, err := os.ReadFile(filepath.Join(filepath.FromSlash(ix.Root), filepath.FromSlash(dir), "go.mod")); err == nil {
		m = module{dir: dir, path: modulePath(b)}
	} else if dir != "." {
		m = ix.moduleOf(path.Dir(dir))
	}
	ix.mods.Store(dir, m)
	return m
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod []byte) string {
	for _, l := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), "\"`")
		}
	}
	return ""
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}
