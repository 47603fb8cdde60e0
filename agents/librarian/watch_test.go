package librarian

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// The watcher indexes what changed and nothing else: an edited file, a file
// in a new directory, a removed file, each recorded as index_update events
// naming those files only.
func TestWatchIndexesChangedFiles(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	g, err := GenerateTree(dir, 20, 3)
	if err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	r.scan(ix)

	var mu sync.Mutex
	var batches [][]string
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	wg.Go(func() {
		close(ready)
		err := ix.Watch(ctx, 20*time.Millisecond, func(ctx context.Context, paths []string) error {
			ups, err := ix.Paths(ctx, mustKnown(r, ix), paths)
			if err != nil {
				return err
			}
			r.record(ups)
			mu.Lock()
			defer mu.Unlock()
			for _, u := range ups {
				var named []string
				for _, f := range u.Files {
					named = append(named, f.Path)
				}
				named = append(named, u.Removed...)
				batches = append(batches, named)
			}
			return nil
		}, func(err error) { t.Errorf("watch: %v", err) })
		if err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-ready

	// Writes until the watcher has seen one: its watches are set up
	// asynchronously to the test.
	i := slices.IndexFunc(g.Files, func(p string) bool { return filepath.Ext(p) == ".go" && filepath.Dir(p) != "." })
	edited := g.Files[i]
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defined := func(name string) bool {
		res, err := r.store.Code(r.ctx, projections.CodeQuery{Root: ix.Root, Kind: projections.CodeSymbol, Text: name})
		return err == nil && len(res.Symbols) > 0
	}
	n := 0
	if !brokertest.Poll(10*time.Second, func() bool {
		if n%40 == 0 { // again every 200 ms, longer than the debounce
			write(edited, "package gen\n\nfunc WatchedEdit() {}\n// "+string(rune('a'+n/40%26))+"\n")
		}
		n++
		return defined("WatchedEdit")
	}) {
		t.Fatal("an edit was never indexed")
	}
	write("newpkg/sub/fresh.go", "package sub\n\nfunc FreshlyMade() {}\n")
	if !brokertest.Poll(10*time.Second, func() bool { return defined("FreshlyMade") }) {
		t.Fatal("a file in a new directory was never indexed")
	}
	if err := os.Remove(filepath.Join(dir, "newpkg/sub/fresh.go")); err != nil {
		t.Fatal(err)
	}
	if !brokertest.Poll(10*time.Second, func() bool { return !defined("FreshlyMade") }) {
		t.Fatal("a removed file stayed in the index")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range batches {
		for _, p := range b {
			if p != edited && p != "newpkg/sub/fresh.go" {
				t.Errorf("the watcher indexed %s, which did not change (batches %v)", p, batches)
			}
		}
	}
	if !slices.ContainsFunc(batches, func(b []string) bool { return slices.Contains(b, "newpkg/sub/fresh.go") }) {
		t.Errorf("batches %v never named the new file", batches)
	}
}

func mustKnown(r *rig, ix *Indexer) Known {
	k, err := KnownFrom(r.ctx, r.store, ix.Root)
	if err != nil {
		r.t.Error(err)
	}
	return k
}

// A file rewritten again and again while it is read, the tree scanned and
// watched: every version read is one the file held, never a mix of two read
// across a write, and once the writes stop the index holds the file's final
// content.
func TestFileChangingWhileIndexed(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	if _, err := GenerateTree(dir, 30, 5); err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	r.scan(ix)

	// Versions of different sizes, each defining its own function; the
	// last is the final one.
	const rel, kinds = "churn.go", 7
	versions := make([]string, kinds+1)
	for i := range versions {
		var b strings.Builder
		fmt.Fprintf(&b, "package gen\n\nfunc Version%d() {}\n", i)
		for k := range 3000 + 1000*i {
			fmt.Fprintf(&b, "// line %d of version %d\n", k, i)
		}
		versions[i] = b.String()
	}
	full := filepath.Join(dir, rel)
	if err := os.WriteFile(full, []byte(versions[0]), 0o644); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var recorded []schemas.IndexedFile // read, and recorded or not
	note := func(ups []schemas.IndexUpdate) {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range ups {
			for _, f := range u.Files {
				if f.Path == rel {
					recorded = append(recorded, f)
				}
			}
		}
	}
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := ix.Watch(ctx, 20*time.Millisecond, func(ctx context.Context, paths []string) error {
			ups, err := ix.Paths(ctx, mustKnown(r, ix), paths)
			if err != nil {
				return err
			}
			r.record(ups)
			note(ups)
			return nil
		}, func(err error) { t.Errorf("watch: %v", err) })
		if err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The writer rewrites the file as fast as it can until it has been
	// read 2000 times meanwhile: the file is read over and over (what an
	// update of it would record), and now and then the whole tree is
	// scanned and recorded.
	var reads atomic.Int64
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := 0; reads.Load() < 2000; i++ {
			if err := os.WriteFile(full, []byte(versions[i%kinds]), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for waiting := true; waiting; reads.Add(1) {
		select {
		case <-done:
			waiting = false
		default:
		}
		if reads.Load()%50 == 0 {
			note(r.scan(ix))
			continue
		}
		ups, err := ix.Paths(r.ctx, Known{}, []string{rel})
		if err != nil {
			t.Fatal(err)
		}
		note(ups)
	}
	final := versions[kinds]
	if err := os.WriteFile(full, []byte(final), 0o644); err != nil {
		t.Fatal(err)
	}
	finalHash := contentHash([]byte(final))
	if !brokertest.Poll(10*time.Second, func() bool {
		k, err := KnownFrom(r.ctx, r.store, ix.Root, rel)
		return err == nil && k.Hashes[rel] == finalHash
	}) {
		t.Fatalf("the index never held the final content of %s", rel)
	}
	defs := r.code(ix.Root, projections.CodeSymbol, fmt.Sprintf("Version%d", kinds)).Symbols
	if len(defs) != 1 || defs[0].Path != rel {
		t.Errorf("the final version's function: %+v", defs)
	}
	if defs := r.code(ix.Root, projections.CodeSymbol, fmt.Sprintf("Version%d", kinds-1)).Symbols; len(defs) != 0 {
		t.Errorf("an earlier version's function is still indexed: %+v", defs)
	}

	// A write passes through its version's prefixes (the file is
	// truncated, then filled); a read across a write would mix two.
	state := func(f schemas.IndexedFile) int {
		for v, text := range versions {
			if int(f.Size) <= len(text) && contentHash([]byte(text[:f.Size])) == f.Hash {
				return v
			}
		}
		return -1
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range recorded {
		v := state(f)
		switch {
		case v < 0:
			t.Errorf("recorded %d bytes of %s that it never held (a read across a write)", f.Size, rel)
		case int(f.Size) == len(versions[v]) && (len(f.Symbols) != 1 || f.Symbols[0].Name != fmt.Sprintf("Version%d", v)):
			t.Errorf("version %d recorded with symbols %+v", v, f.Symbols)
		}
	}
	if len(recorded) < 3 {
		t.Errorf("%d reads and scans saw %d versions of %s: the test did not race the writer", reads.Load(), len(recorded), rel)
	}
	t.Logf("%d reads and scans, %d versions read", reads.Load(), len(recorded))
}
