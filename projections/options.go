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
	// DefaultCacheBytes bounds the decoded state objects the fold keeps
	// between batches, by what they hold in memory (see cache).
	DefaultCacheBytes = 512 << 20
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
// and the Go heap limit it runs under, to bound its peak resident set.
const (
	// RebuildMemTableBytes: Pebble's memtables live outside the Go heap, and
	// one is written while the next fills, so a rebuild holds up to twice
	// this.
	RebuildMemTableBytes = 128 << 20
	// RebuildCacheBytes bounds the fold's cache during a rebuild: held
	// objects are written when they count for half of it.
	RebuildCacheBytes = 256 << 20
	// RebuildGCPercent is GOGC while a rebuild folds, and RebuildHeapBytes
	// how far the Go heap may grow during it beyond what the process held
	// live when it started (the embedded server's index of the stream,
	// which the fold does not control). A rebuild of 1M generated events
	// peaked near 550 MB live, so the default GOGC let the heap reach about
	// 1 GB (a peak RSS of 1.23 GiB). Under a limit 768 MiB above the start
	// it peaked at 1,030-1,070 MiB; 640 MiB above, at 924-935 MiB, for
	// 5-10% more CPU time. The limit is relative so that it stays above the
	// live heap: an absolute 700 MiB limit made the collector thrash at 5M
	// events.
	RebuildGCPercent = 200
	RebuildHeapBytes = 640 << 20
)

// ForRebuild returns o as a store opened only to be rebuilt is opened: no
// write-ahead log (see NoWAL), the rebuild's collector settings (see
// GCPercent), and the rebuild sizes where o leaves them unset.
func (o Options) ForRebuild() Options {
	o.NoWAL = true
	if o.GCPercent == 0 {
		o.GCPercent, o.HeapBytes = RebuildGCPercent, RebuildHeapBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = RebuildMemTableBytes
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = RebuildCacheBytes
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
	// the whole stream, and HeapBytes (when set) caps the Go heap at what
	// the process holds live when the rebuild starts plus HeapBytes
	// (runtime/debug.SetMemoryLimit), unless GOMEMLIMIT set a limit: the
	// collector then runs far less often without the heap growing with the
	// stream. Both are put back when the rebuild ends. They are the whole
	// process's settings: for a process that only rebuilds (`sylk
	// projections rebuild`), never a server's store.
	GCPercent int
	HeapBytes int64

	CacheBytes            int64
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
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
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
	case o.CacheBytes < 0:
		return fmt.Errorf("%w: CacheBytes %d is negative", ErrInvalidOptions, o.CacheBytes)
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
	case o.HeapBytes < 0:
		return fmt.Errorf("%w: HeapBytes %d is negative", ErrInvalidOptions, o.HeapBytes)
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
