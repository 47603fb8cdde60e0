package projections

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults.
const (
	// DefaultCacheObjects is how many decoded state objects the fold keeps
	// between batches.
	DefaultCacheObjects = 300_000
	// DefaultBatchEvents and DefaultBatchBytes bound one Pebble batch: while
	// catching up, events are folded in batches this large, each one commit.
	// A batch must stay well under half the memtable: a larger one is
	// committed as its own flushable table, which rotates the memtable.
	DefaultBatchEvents = 50_000
	DefaultBatchBytes  = 16 << 20
	// DefaultBatchDelay bounds how long an applied event waits for more events
	// to share its batch when the stream says more are coming: following the
	// stream live, from the batch's first event; catching up, from the last
	// event received, so a batch fills while the reader keeps up. An event
	// with nothing behind it is committed at once.
	DefaultBatchDelay = 100 * time.Millisecond
	// DefaultBlockCacheBytes is Pebble's block cache.
	DefaultBlockCacheBytes = 32 << 20
	// DefaultMemTableBytes is Pebble's largest memtable. Pebble starts with
	// small memtables and doubles them only under sustained writes, so only a
	// catch-up or rebuild grows them this far. Each flush of a fold's memtable
	// adds a sublevel spanning the whole store to level 0: at 256 MiB a rebuild
	// of a million events flushes half as often as at 128 MiB and spends about
	// 1.5 s less CPU time in compactions.
	DefaultMemTableBytes = 256 << 20
	// DefaultL0CompactionThreshold is how many overlapping sublevels of
	// Pebble's level 0 start a compaction (Pebble's own default is 4; writes
	// stall at three times as many). A fold's memtable holds keys from all over
	// the store (each session's log, each correlation's trace), so every flush
	// adds a sublevel, and at 4 a rebuild of a million events rewrote its
	// output in about twenty compactions, a sixth of its CPU time; at 8 it
	// takes three or four. Reads meet at most eight sublevels, each with a
	// bloom filter for point lookups.
	DefaultL0CompactionThreshold = 8
)

// What `sylk projections rebuild` opens its store with (Options.ForRebuild)
// and the memory it aims at, to bound its peak resident set.
const (
	// RebuildMemTableBytes: Pebble's memtables live outside the Go heap, and
	// one is written while the next fills, so a rebuild holds up to twice
	// this. At 128 MiB the two were a quarter of a 1M-event rebuild's peak
	// of 1.25 GB. RebuildL0CompactionThreshold keeps the compactions of the
	// twice as many flushes as few as they were: at 64 MiB and 8 sublevels
	// a rebuild of 1M events ran 42-49 compactions and took 18.4-19.8 s of
	// CPU time; at 16 sublevels 17-20 and 15.3-15.9 s (at 128 MiB and 8
	// under the same memory budget, 34-42 and 18.7-19.5 s). The store is
	// opened with the default threshold afterwards, which compacts what is
	// left.
	RebuildMemTableBytes         = 64 << 20
	RebuildL0CompactionThreshold = 16
	// RebuildCacheObjects is half the default: held objects are written
	// when half the cache is dirty.
	RebuildCacheObjects = 150_000
	// RebuildGCPercent is GOGC while a rebuild folds, and RebuildMemoryBytes
	// the resident set it aims at (see Options.MemoryBytes). A rebuild of 1M
	// generated events holds 430-450 MB live at its peak past the stream's
	// duplicate window, 600-640 MB inside it (the embedded server's table of
	// the window's message ids, and what it keeps of each block it read).
	// Under a heap limit 640 MiB above the live heap at the start, with
	// 128 MiB memtables, it peaked at 985-1,004 MB past the window and
	// 1,256-1,267 MB inside it; under this budget at 887-928 MB either way,
	// for about 40% more CPU time inside the window (40 collections instead
	// of 19) and less past it.
	RebuildGCPercent   = 200
	RebuildMemoryBytes = 900 << 20
	// rebuildMinHeadroom is how far above the live heap at the start the
	// Go heap limit stays, whatever the memory budget: about what the fold
	// holds at 1M generated events (its cached objects and batches, 300-350
	// MB), so that an embedded server holding more than the budget leaves
	// (a stream written in the last 10 minutes: its duplicate window) makes
	// the rebuild exceed the budget rather than the collector run without
	// end. The fold's cache is bounded in objects, not bytes: at 5M events
	// (100,000 sessions running at once) its 150,000 objects are mostly
	// DAGs read back from the store, about 600 MB, and the heap outgrows
	// any limit under 1 GB.
	rebuildMinHeadroom = 384 << 20
	// rebuildProgramBytes is the resident set outside the Go heap and
	// Pebble's memory: the program's text and data, mostly.
	rebuildProgramBytes = 32 << 20
)

// ForRebuild returns o as a store opened only to be rebuilt is opened: no
// write-ahead log (see NoWAL), the rebuild's collector settings (see
// GCPercent), and the rebuild sizes where o leaves them unset.
func (o Options) ForRebuild() Options {
	o.NoWAL = true
	if o.GCPercent == 0 {
		o.GCPercent, o.MemoryBytes = RebuildGCPercent, RebuildMemoryBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = RebuildMemTableBytes
	}
	if o.L0CompactionThreshold == 0 {
		o.L0CompactionThreshold = RebuildL0CompactionThreshold
	}
	if o.CacheObjects == 0 {
		o.CacheObjects = RebuildCacheObjects
	}
	return o
}

// ErrInvalidOptions is wrapped by every Options.Validate failure.
var ErrInvalidOptions = errors.New("invalid projections options")

// Options configure Open.
type Options struct {
	// Dir is the Pebble directory, by convention <data>/projections. Required.
	Dir string
	// FS is the filesystem; tests use vfs.NewMem(). Default vfs.Default.
	FS vfs.FS
	// Logger receives warnings (a store moved aside, a projection rebuilt) and
	// Pebble's own messages at debug level. Default slog.Default().
	Logger *slog.Logger

	// Skip names projections this store does not fold: their cursors stay
	// where they are, so a store opened later without them catches them up.
	// It measures what a projection costs (sylk bench rebuild).
	Skip []string

	// NoWAL writes no write-ahead log, and so never syncs one: a crash
	// loses every write not yet flushed to a table (Close flushes the
	// rest). Pebble flushes memtables in order, so what a crash leaves is
	// the store as of some earlier commit. For a disposable store (a
	// re-execution's scratch projections), and for `sylk projections
	// rebuild`: a rebuild marks the store unfinished in its first commit,
	// so a crash leaves either the store as it was before or one marked
	// unfinished, rebuilt again when opened; a log would protect nothing.
	NoWAL bool

	// GCPercent, when set, is the Go collector's GOGC while Rebuild folds
	// the whole stream, and MemoryBytes (when set) the resident set the
	// process aims at meanwhile: the Go heap is limited to it less what
	// Pebble holds outside the Go heap (two memtables and the block cache,
	// allocated by C when built with cgo; without cgo they are in the Go
	// heap and counted twice) and the program itself, but to no less than
	// the live heap at the start (the embedded server's index of the
	// stream, which the fold does not control) plus what the fold needs
	// (runtime/debug.SetMemoryLimit). GOMEMLIMIT, when set, replaces that
	// limit. Both are put back when the rebuild ends. They are the whole
	// process's settings: for a process that only rebuilds (`sylk
	// projections rebuild`), never a server's store.
	GCPercent   int
	MemoryBytes int64

	CacheObjects          int
	BatchEvents           int
	BatchBytes            int
	BatchDelay            time.Duration
	BlockCacheBytes       int64
	MemTableBytes         uint64
	L0CompactionThreshold int
}

// EnsureDefaults fills unset fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheObjects == 0 {
		o.CacheObjects = DefaultCacheObjects
	}
	if o.BatchEvents == 0 {
		o.BatchEvents = DefaultBatchEvents
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.BatchDelay == 0 {
		o.BatchDelay = DefaultBatchDelay
	}
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = DefaultBlockCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.L0CompactionThreshold == 0 {
		o.L0CompactionThreshold = DefaultL0CompactionThreshold
	}
	return o
}

// Validate reports the first unusable setting.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: no directory", ErrInvalidOptions)
	case o.CacheObjects < 0:
		return fmt.Errorf("%w: CacheObjects %d is negative", ErrInvalidOptions, o.CacheObjects)
	case o.BatchEvents < 1:
		return fmt.Errorf("%w: BatchEvents %d must be at least 1", ErrInvalidOptions, o.BatchEvents)
	case o.BatchBytes < 1:
		return fmt.Errorf("%w: BatchBytes %d must be at least 1", ErrInvalidOptions, o.BatchBytes)
	case o.BatchDelay < 0:
		return fmt.Errorf("%w: BatchDelay %s is negative", ErrInvalidOptions, o.BatchDelay)
	case o.MemTableBytes < 1<<20:
		return fmt.Errorf("%w: MemTableBytes %d is below 1 MiB", ErrInvalidOptions, o.MemTableBytes)
	case o.GCPercent < 0:
		return fmt.Errorf("%w: GCPercent %d is negative", ErrInvalidOptions, o.GCPercent)
	case o.MemoryBytes < 0:
		return fmt.Errorf("%w: MemoryBytes %d is negative", ErrInvalidOptions, o.MemoryBytes)
	case o.L0CompactionThreshold < 1:
		return fmt.Errorf("%w: L0CompactionThreshold %d must be at least 1", ErrInvalidOptions, o.L0CompactionThreshold)
	case uint64(o.BatchBytes) > o.MemTableBytes/3:
		return fmt.Errorf("%w: BatchBytes %d is above a third of MemTableBytes %d", ErrInvalidOptions, o.BatchBytes, o.MemTableBytes)
	}
	for _, name := range o.Skip {
		if projectionByName(name) == nil {
			return fmt.Errorf("%w: Skip: no projection %q (there are %s)", ErrInvalidOptions, name, strings.Join(ProjectionNames(), ", "))
		}
	}
	return nil
}

// folds reports whether the store folds projection p (see Skip).
func (o *Options) folds(p *projection) bool { return !slices.Contains(o.Skip, p.name) }
