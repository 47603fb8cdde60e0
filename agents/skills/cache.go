package skills

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// cacheVersion changes whenever what a parse produces changes: a cache file
// of another version is ignored (and replaced).
const cacheVersion = 1

// CacheFile is the discovery cache's file name under a data directory.
const CacheFile = "skills.cache"

// Cache keeps parsed skills between discoveries, in memory and in a file,
// so a discovery parses only the SKILL.md files that changed: an entry is
// used while the file's path, size and modification time (to the
// nanosecond) and the body cap are those it was parsed with; any change
// parses the file again. Only skills on disk are cached (the built-in ones
// are parsed, they are few); the references/, assets/ and scripts/ listings
// are read every time. A broken skill is cached as broken until its file
// changes.
//
// A Cache is safe for concurrent use, and for several processes sharing the
// file (each writes a whole new file and renames it into place; the last
// writer wins, which costs at most a parse). A nil *Cache caches nothing.
type Cache struct {
	path string

	mu      sync.Mutex
	loaded  bool
	entries map[string]*cacheEntry
	dirty   bool
}

// cacheEntry is one SKILL.md as parsed.
type cacheEntry struct {
	Size    int64
	ModTime int64
	MaxBody int
	// Skill is nil when a problem was fatal.
	Skill *Skill
	Probs []Problem

	// compiled makes Skill's matcher once per entry (a gob-decoded entry
	// has none; a parse's has one already): every agent loop's start uses
	// the entries of every skill.
	compiled   sync.Once
	compileErr error
}

// cacheData is the file's content.
type cacheData struct {
	Version int
	Entries map[string]*cacheEntry
}

// OpenCache is the cache kept in file path (read on first use; a missing,
// unreadable or outdated file starts it empty). An empty path keeps it in
// memory only.
func OpenCache(path string) *Cache { return &Cache{path: path} }

// load reads the file once; c.mu is held.
func (c *Cache) load() {
	if c.loaded {
		return
	}
	c.loaded, c.entries = true, map[string]*cacheEntry{}
	if c.path == "" {
		return
	}
	f, err := os.Open(c.path)
	if err != nil {
		return
	}
	defer f.Close()
	var d cacheData
	if gob.NewDecoder(f).Decode(&d) == nil && d.Version == cacheVersion && d.Entries != nil {
		c.entries = d.Entries
	}
}

// builtinParses are the built-in skills as parsed, their directories
// listed, by directory and body cap (builtinKey -> *builtinParse): they are
// compiled into the binary, so each is parsed and listed once per process,
// not at every discovery (every agent loop's start).
var builtinParses sync.Map

type builtinParse struct {
	skill *Skill // nil when a problem was fatal
	probs []Problem
}

// use returns a copy of the parse, for the caller to keep.
func (b *builtinParse) use() (*Skill, []Problem) {
	probs := slices.Clone(b.probs)
	if b.skill == nil {
		return nil, probs
	}
	s := *b.skill
	s.Metadata = maps.Clone(s.Metadata)
	s.References, s.Assets, s.Scripts = slices.Clone(s.References), slices.Clone(s.Assets), slices.Clone(s.Scripts)
	return &s, probs
}

type builtinKey struct {
	dir     string
	maxBody int
}

// parse is Parse through the cache, for a skill of a location on disk; a
// built-in skill is parsed once per process.
func (c *Cache) parse(loc *Location, dir string, maxBody int) (*Skill, []Problem) {
	if loc.FS == Builtin() {
		k := builtinKey{dir, maxBody}
		b, ok := builtinParses.Load(k)
		if !ok {
			s, probs := Parse(loc.FS, dir, maxBody)
			b, _ = builtinParses.LoadOrStore(k, &builtinParse{skill: s, probs: probs})
		}
		return b.(*builtinParse).use()
	}
	if c == nil || loc.Dir == "" {
		return Parse(loc.FS, dir, maxBody)
	}
	file := filepath.Join(loc.Dir, dir, FileName)
	before, err := os.Stat(file)
	if err != nil {
		return Parse(loc.FS, dir, maxBody) // which says what is wrong
	}
	c.mu.Lock()
	c.load()
	e := c.entries[file]
	c.mu.Unlock()
	if e != nil && e.fresh(before, maxBody) {
		return e.use(loc.FS, dir)
	}
	s, probs := Parse(loc.FS, dir, maxBody)
	after, err := os.Stat(file)
	if err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return s, probs // changed while read: not cached, parsed again next time
	}
	e = newEntry(s, probs, maxBody)
	e.Size, e.ModTime = before.Size(), before.ModTime().UnixNano()
	c.mu.Lock()
	c.entries[file], c.dirty = e, true
	c.mu.Unlock()
	return s, probs
}

// newEntry keeps a parse: a copy of the skill without its directory's
// listings, which use reads again.
func newEntry(s *Skill, probs []Problem, maxBody int) *cacheEntry {
	e := &cacheEntry{MaxBody: maxBody, Probs: probs}
	if s != nil {
		cp := *s
		cp.References, cp.Assets, cp.Scripts = nil, nil, nil
		e.Skill = &cp
	}
	return e
}

func (e *cacheEntry) fresh(fi fs.FileInfo, maxBody int) bool {
	return e.Size == fi.Size() && e.ModTime == fi.ModTime().UnixNano() && e.MaxBody == maxBody
}

// use returns a copy of the cached parse, its matcher compiled (once, and
// shared: a matcher is read-only) and its directory listed.
func (e *cacheEntry) use(fsys fs.FS, dir string) (*Skill, []Problem) {
	probs := slices.Clone(e.Probs)
	if e.Skill == nil {
		return nil, probs
	}
	e.compiled.Do(func() {
		if e.Skill.match == nil {
			e.compileErr = e.Skill.compile()
		}
	})
	s := *e.Skill
	s.Metadata = maps.Clone(s.Metadata)
	if err := e.compileErr; err != nil {
		// Compiled when it was parsed: a cache file that lies.
		return nil, []Problem{{Path: dir + "/" + FileName, Field: "metadata.load-trigger", Msg: fmt.Sprintf("%q is not a valid pattern: %v", s.Trigger, err), Fatal: true}}
	}
	s.References, s.Assets, s.Scripts = listFiles(fsys, dir)
	return &s, probs
}

// forget drops the entries of skills under the scanned locations that were
// not seen (their directories are gone), so the file does not grow with
// skills deleted long ago; entries of other locations (another project's)
// stay.
func (c *Cache) forget(scanned []string, seen map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for file := range c.entries {
		if seen[file] {
			continue
		}
		for _, dir := range scanned {
			if strings.HasPrefix(file, dir+string(filepath.Separator)) {
				delete(c.entries, file)
				c.dirty = true
				break
			}
		}
	}
}

// save writes the file if anything changed: a new file renamed into place.
func (c *Cache) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty || c.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return err
	}
	err = gob.NewEncoder(tmp).Encode(cacheData{Version: cacheVersion, Entries: c.entries})
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	c.dirty = false
	return nil
}
