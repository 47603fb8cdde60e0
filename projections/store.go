package projections

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrLocked: another process has the store open.
var ErrLocked = errors.New("projections store in use by another process")

// Store is the Pebble store of every projection. Reads are safe from any
// goroutine; one Projector writes. Close it after stopping its projector.
type Store struct {
	opts   Options
	log    *slog.Logger
	db     *pebble.DB
	lock   *pebble.Lock
	pcache *pebble.Cache

	openedAt time.Time

	mu      sync.Mutex
	cursors map[string]uint64
	// follows are the projections whose stored cursor follows the head
	// (see followsHead).
	follows    map[string]bool
	changed    chan struct{} // closed and replaced at each commit
	streamLast uint64
	ready      bool
	startup    time.Duration
	rebuild    *Progress
	// incomplete: a rebuild started and has not finished (rebuildKey is
	// set); interrupted: it was found so on Open, and the next fold
	// rebuilds from the start.
	incomplete, interrupted bool
	closed                  bool
	projector               *Projector

	// wanted is the highest seq a WaitFor blocks on (0: none); poke wakes the
	// projector when it rises, so a batch holding that seq is committed at
	// once instead of waiting out BatchDelay for more events.
	wanted atomic.Uint64
	poke   chan struct{}

	// observers see the events the projector reads (Observe); observedTo
	// is the last event its reader handed on. The reader holds observeMu
	// for each event, so that an observer starts exactly after one.
	observeMu  sync.Mutex
	observers  []*observer
	observedTo uint64

	// vectors are the nearest-neighbour indexes searches built, derived
	// from the projections and kept up to date by the searches (trained in
	// the background: Close waits for them).
	vectors vectorIndexes
	// codeSegments are the code index's segments searches read, kept
	// while the index they are of is unchanged.
	codeSegments segmentCache
	// calls answers lookups of call records that are not there.
	calls *callKeys
}

// Open opens (or creates) the store in opts.Dir. A directory Pebble cannot open
// is moved aside (to Dir.broken, Dir.broken-2, ...) with a warning and a fresh
// store takes its place; a projection whose version changed is dropped. Either
// way the projector then rebuilds from the stream.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, log: opts.Logger, openedAt: time.Now(), changed: make(chan struct{}), poke: make(chan struct{}, 1)}
	err := s.openPebble()
	if err == nil {
		err = s.loadMeta()
		if err != nil {
			s.closePebble()
		}
	}
	if err != nil {
		if errors.Is(err, ErrLocked) || ctx.Err() != nil {
			return nil, err
		}
		moved, merr := moveAside(opts.FS, opts.Dir)
		if merr != nil {
			return nil, fmt.Errorf("projections store %s does not open (%w) and cannot be moved aside: %w", opts.Dir, err, merr)
		}
		s.log.Warn("projections store does not open; moved it aside and rebuilding it from the stream",
			"dir", opts.Dir, "moved_to", moved, "err", err)
		if err := s.openPebble(); err != nil {
			return nil, err
		}
		if err := s.loadMeta(); err != nil {
			s.closePebble()
			return nil, err
		}
	}
	if err := s.checkVersions(); err != nil {
		s.closePebble()
		return nil, err
	}
	s.calls = newCallKeys()
	go func() {
		if err := s.calls.scan(s.db); err != nil {
			s.log.Warn("cannot list the recorded calls; looking each one up in the store", "err", err)
		}
	}()
	return s, nil
}

// openMem opens an empty store in memory, for rebuilds that are compared or
// read and thrown away.
func openMem(ctx context.Context, log *slog.Logger) (*Store, error) {
	return Open(ctx, Options{Dir: "mem", FS: vfs.NewMem(), Logger: log, MemTableBytes: 16 << 20, BatchBytes: 4 << 20, BlockCacheBytes: 8 << 20})
}

func (s *Store) pebbleOptions() *pebble.Options {
	o := &pebble.Options{
		FS:                 s.opts.FS,
		Cache:              s.pcache,
		MemTableSize:       s.opts.MemTableBytes,
		DisableWAL:         s.opts.NoWAL,
		Logger:             pebbleLogger{s.log},
		FormatMajorVersion: pebble.FormatNewest,
	}
	// Folds look up keys that mostly do not exist yet (a call id's first
	// result, a new session): bloom filters answer those without a block read.
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Writes stall at three times the compaction threshold, Pebble's ratio.
	o.L0CompactionThreshold, o.L0StopWritesThreshold = s.opts.L0CompactionThreshold, 3*s.opts.L0CompactionThreshold
	o.EnsureDefaults()
	return o
}

// durable is how a write that must survive a crash is committed: synced to
// the write-ahead log, unless the store keeps none (Options.NoWAL).
func (s *Store) durable() *pebble.WriteOptions {
	if s.opts.NoWAL {
		return pebble.NoSync
	}
	return pebble.Sync
}

func (s *Store) openPebble() error {
	fs, dir := s.opts.FS, s.opts.Dir
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrLocked, dir, err)
	}
	s.pcache = pebble.NewCache(s.opts.BlockCacheBytes)
	o := s.pebbleOptions()
	o.Lock = lock
	db, err := pebble.Open(dir, o)
	if err != nil {
		lock.Close()
		s.pcache.Unref()
		s.pcache = nil
		return fmt.Errorf("open pebble %s: %w", dir, err)
	}
	s.db, s.lock = db, lock
	return nil
}

func (s *Store) closePebble() error {
	var errs []error
	if s.db != nil {
		errs = append(errs, s.db.Close())
		s.db = nil
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	if s.pcache != nil {
		s.pcache.Unref()
		s.pcache = nil
	}
	return errors.Join(errs...)
}

// moveAside renames dir to the first free dir.broken[-N] and returns the name.
func moveAside(fs vfs.FS, dir string) (string, error) {
	for i := 1; i < 1000; i++ {
		to := dir + ".broken"
		if i > 1 {
			to += "-" + strconv.Itoa(i)
		}
		if _, err := fs.Stat(to); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		return to, fs.Rename(dir, to)
	}
	return "", fmt.Errorf("too many broken copies of %s", dir)
}

// loadMeta reads every cursor; a store whose metadata does not read counts as
// broken.
func (s *Store) loadMeta() error {
	var err error
	if s.cursors, s.follows, err = readCursors(s.db); err != nil {
		return fmt.Errorf("read the cursors: %w", err)
	}
	v, err := s.get(rebuildKey)
	if err != nil {
		return fmt.Errorf("read the rebuild mark: %w", err)
	}
	if v != nil {
		// An interrupted rebuild: what it wrote is a part of the stream's
		// fold, not one up to its cursors (objects it held were never
		// written). Status shows a rebuild until the projector has redone it.
		s.incomplete, s.interrupted = true, true
		s.rebuild = &Progress{}
	}
	return nil
}

// checkVersions drops every projection whose stored version is not the current
// one, so the projector rebuilds it.
func (s *Store) checkVersions() error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, p := range projectionList {
		v, err := s.get(versionKey(p.name))
		if err != nil {
			return err
		}
		switch string(v) {
		case p.storedVersion():
			continue
		case strconv.Itoa(p.version):
			// Written before cursors could follow the head: the same
			// state, marked so that such a binary rebuilds it (see
			// cursorLayout).
			if err := b.Set(versionKey(p.name), []byte(p.storedVersion()), nil); err != nil {
				return err
			}
			continue
		}
		if len(v) > 0 || s.cursors[p.name] != 0 {
			s.log.Info("projection version changed: rebuilding it", "projection", p.name, "from", string(v), "to", p.storedVersion())
		}
		if err := dropProjection(b, p); err != nil {
			return err
		}
		s.cursors[p.name], s.follows[p.name] = 0, false
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(s.durable())
}

// dropProjection deletes a projection's keys and cursor and records its current
// version.
func dropProjection(b *pebble.Batch, p *projection) error {
	if err := b.DeleteRange(p.prefix(), prefixEnd(p.prefix()), nil); err != nil {
		return err
	}
	if err := b.Delete(cursorKey(p.name), nil); err != nil {
		return err
	}
	return b.Set(versionKey(p.name), []byte(p.storedVersion()), nil)
}

// dropAll deletes every projection and the head, for a full rebuild, and
// marks the store incomplete until the rebuild has finished (finishRebuild).
//
// Every key but the mark is excised (the tables dropped, the few that hold
// the mark cut around it), not covered by range deletions: those left the old
// keys in their tables until compactions reached them, and since a rebuild
// writes the same keys again, all over the store, every compaction of the
// rebuild merged its new tables with the old ones (37-45 compactions in a
// rebuild of 1M events over its last store, 0-3 into an empty directory).
// The mark goes first, durably (without a write-ahead log, flushed to a
// table): interrupted at any point after, the store is marked unfinished.
func (s *Store) dropAll() error {
	if err := s.db.Set(rebuildKey, []byte{1}, s.durable()); err != nil {
		return err
	}
	if s.opts.NoWAL {
		if err := s.db.Flush(); err != nil {
			return err
		}
	}
	for _, span := range allButTheMark {
		if err := s.db.Excise(context.Background(), span); err != nil {
			return fmt.Errorf("drop the projections: %w", err)
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, p := range projectionList {
		if err := b.Set(versionKey(p.name), []byte(p.storedVersion()), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(s.durable()); err != nil {
		return err
	}
	s.mu.Lock()
	for k := range s.cursors {
		s.cursors[k], s.follows[k] = 0, false
	}
	s.incomplete = true
	s.mu.Unlock()
	return nil
}

// finishRebuild clears the mark of a rebuild that has folded the whole
// stream (its last batch is synced by then).
func (s *Store) finishRebuild() error {
	s.mu.Lock()
	incomplete := s.incomplete
	s.mu.Unlock()
	if !incomplete {
		return nil
	}
	if err := s.db.Delete(rebuildKey, s.durable()); err != nil {
		return fmt.Errorf("mark the rebuild finished: %w", err)
	}
	s.mu.Lock()
	s.incomplete, s.rebuild = false, nil
	s.mu.Unlock()
	return nil
}

// get reads a value, copied; nil when absent.
func (s *Store) get(k []byte) ([]byte, error) {
	return getFrom(s.db, k)
}

func getFrom(r pebble.Reader, k []byte) ([]byte, error) {
	v, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

// flushOnCloseBytes: Close flushes the memtable when the log behind it holds
// more, so the next Open has little to replay; a few commands' worth is
// replayed faster than it is flushed.
const flushOnCloseBytes = 4 << 20

// Close flushes a large memtable (so the next Open replays little), or any
// memtable of a store that keeps no log (its only copy), and closes the
// store. Stop the projector first. A store without a log whose rebuild has
// not finished is not flushed: what it folded is redone when it is opened
// again (its disk holds the store as before the rebuild or one marked
// unfinished), and flushing hundreds of megabytes made an interrupted
// rebuild take tens of seconds to stop.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.changed)
	unfinished := s.incomplete
	s.mu.Unlock()
	s.vectors.wait()
	if s.calls != nil {
		close(s.calls.stop)
		<-s.calls.done
	}
	var ferr error
	if s.db != nil && (s.opts.NoWAL && !unfinished || s.db.Metrics().WAL.Size > flushOnCloseBytes) {
		ferr = s.db.Flush()
	}
	return errors.Join(ferr, s.closePebble())
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.opts.Dir }

// Cursor is the last stream sequence every projection has applied.
func (s *Store) Cursor() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appliedLocked()
}

func (s *Store) appliedLocked() uint64 {
	first := true
	var min uint64
	for _, c := range s.cursors {
		if first || c < min {
			min, first = c, false
		}
	}
	return min
}

func (s *Store) cursorsCopy() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.cursors)
}

// followsCopy is a copy of follows.
func (s *Store) followsCopy() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.follows)
}

// advanced records a commit (the cursors it moved, those whose stored form
// changed, and whether it caught up with the stream) and wakes WaitFor
// callers: one who reads the status then sees the store ready.
func (s *Store) advanced(cursors map[string]uint64, follows map[string]bool, streamLast uint64, caughtUp bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.cursors, cursors)
	maps.Copy(s.follows, follows)
	if caughtUp {
		s.readyLocked()
	}
	s.streamLast = max(s.streamLast, streamLast)
	s.served(s.appliedLocked())
	if !s.closed {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// WaitFor blocks until every projection has applied stream sequence seq (an
// Append's result), so a read after it sees the write. It needs a running
// projector (Projector.Run, or CatchUp after the append).
func (s *Store) WaitFor(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		applied, ch, closed := s.appliedLocked(), s.changed, s.closed
		s.mu.Unlock()
		if applied >= seq {
			return nil
		}
		if closed {
			return ErrClosed
		}
		s.want(seq)
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for seq %d (applied %d): %w", seq, applied, ctx.Err())
		}
	}
}

// want records that a reader waits for seq and wakes the projector.
func (s *Store) want(seq uint64) {
	for {
		w := s.wanted.Load()
		if w >= seq {
			return
		}
		if s.wanted.CompareAndSwap(w, seq) {
			break
		}
	}
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// awaited reports whether a reader waits for seq or an earlier one.
func (s *Store) awaited(seq uint64) bool {
	w := s.wanted.Load()
	return w != 0 && w <= seq
}

// served forgets the wait for any seq up to applied.
func (s *Store) served(applied uint64) {
	if w := s.wanted.Load(); w != 0 && w <= applied {
		s.wanted.CompareAndSwap(w, 0)
	}
}

func encodeHead(seq uint64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, seq), id...)
}

func decodeHead(v []byte) (uint64, string) {
	if len(v) < 8 {
		return 0, ""
	}
	return binary.BigEndian.Uint64(v), string(v[8:])
}

// pebbleLogger sends Pebble's messages to slog: chatter at debug, errors as
// warnings. Fatalf panics, as Pebble expects it not to return.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Warn("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble: " + msg)
	panic("pebble: " + msg)
}
