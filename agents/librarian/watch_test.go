package librarian

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/projections"
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
