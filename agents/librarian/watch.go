package librarian

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long a watcher waits after the last change before
// it indexes what changed: an editor's save or a checkout is many events.
const DefaultDebounce = 200 * time.Millisecond

// Watch watches the work directory (every directory under it but the ones
// the indexer never enters; symlinks are not followed) and calls update with
// the files that changed, relative to the root, once no change came for
// debounce. A new directory is watched and its files are reported; a
// directory that cannot be watched is left out and reported through
// onError, as are update's errors: nothing stops the watch but ctx.
func (ix *Indexer) Watch(ctx context.Context, debounce time.Duration, update func(ctx context.Context, paths []string) error, onError func(error)) error {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	pending := map[string]bool{}
	ix.watchTree(w, filepath.FromSlash(ix.Root), nil, onError)
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			onError(err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			rel := ix.rel(ev.Name)
			if rel == "." || rel == ".." || filepath.IsAbs(rel) || skippedDirs[filepath.Base(ev.Name)] {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
					ix.watchTree(w, ev.Name, pending, onError)
					timer.Reset(debounce)
					continue
				}
			}
			pending[rel] = true
			timer.Reset(debounce)
		case <-timer.C:
			paths := make([]string, 0, len(pending))
			for p := range pending {
				if st, err := os.Lstat(filepath.Join(filepath.FromSlash(ix.Root), filepath.FromSlash(p))); err == nil && st.IsDir() {
					continue // a directory's files are reported, not it
				}
				paths = append(paths, p)
			}
			clear(pending)
			slices.Sort(paths)
			if len(paths) > 0 {
				if err := update(ctx, paths); err != nil && ctx.Err() == nil {
					onError(err)
				}
			}
		}
	}
}

// watchTree watches dir and the directories under it; with found set, it
// adds the files it meets there (a directory created while watching: its
// files were made before its watch).
func (ix *Indexer) watchTree(w *fsnotify.Watcher, dir string, found map[string]bool, onError func(error)) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			onError(err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			if p != dir && skippedDirs[d.Name()] {
				return fs.SkipDir
			}
			if err := w.Add(p); err != nil {
				onError(err)
				return fs.SkipDir
			}
		case found != nil:
			found[ix.rel(p)] = true
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		onError(err)
	}
}
