package projbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
)

// Targets.
const (
	// TargetRebuild: a rebuild runs at least half as fast as the slower of
	// its two raw parts, reading the stream and writing the keys.
	TargetRebuild = 0.5
	// TargetRebuildRead: a rebuild runs at least 0.6 times as fast as a bare
	// ordered read of the same stream.
	TargetRebuildRead = 0.6
	// TargetReplay: reading one session from its log is 50 times faster than
	// a subject-filtered consumer reading it from the stream.
	TargetReplay = 50
	// TargetReplayFlat: replay at the largest stream at least half as fast as
	// at the smallest ("roughly constant as the stream grows").
	TargetReplayFlat = 0.5
	// TargetStartup: ready within one second after a clean stop.
	TargetStartup = 1.0
	// TargetAuditRebuild: the audit projection costs a rebuild at most a
	// tenth of its speed.
	TargetAuditRebuild = 0.9
)

// Config sizes the benchmarks.
type Config struct {
	// Dir holds the generated streams and stores; reused between runs.
	Dir string
	// Events is the rebuild's stream size.
	Events int
	// Sizes are the stream sizes replay is measured at.
	Sizes []int
	// Samples is how many different sessions the baseline reads at each size;
	// the session log reads ten times as many.
	Samples int
	// Rounds of the rebuild comparisons (default 5): the raw read and the
	// rebuild keep their best; with vs without audit is paired by round (each
	// side run twice, mirrored) and compared by the median ratio (on this noisy 2-core machine one ratio of
	// two rounds varied by ±8%, and a best of three by ±20%).
	Rounds int
	// Progress receives a line now and then.
	Progress func(string)
	// Logger for the stores (default: discard).
	Logger *slog.Logger
}

// EnsureDefaults fills the unset fields.
func (c *Config) EnsureDefaults() {
	if c.Events == 0 {
		c.Events = 50_000
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{c.Events}
	}
	if c.Samples == 0 {
		c.Samples = 20
	}
	if c.Rounds == 0 {
		c.Rounds = 5
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// StartupReport is how start-up after a clean stop went.
type StartupReport struct {
	Events int `json:"events"`
	// Seconds is Open plus catching up with the stream (nothing to fold) plus
	// a first query, in this process.
	Seconds float64 `json:"seconds"`
	// Replayed is how many events the start-up folded (0 after a clean stop).
	Replayed uint64 `json:"replayed"`
	// ProcessSeconds and ProcessRSSBytes are a fresh process's whole run
	// ('sylk projections status', embedded broker start included) and its peak
	// resident set, when the caller measures one.
	ProcessSeconds  float64 `json:"process_seconds,omitempty"`
	ProcessRSSBytes int64   `json:"process_rss_bytes,omitempty"`
}

// RebuildResult is the rebuild benchmark's comparisons and start-up report.
type RebuildResult struct {
	Comparisons []eventbench.Comparison
	Startup     *StartupReport
	// Store is the rebuilt store's directory; Data the stream's.
	Store, Data string
}

// Rebuild generates (or reuses) a stream of cfg.Events events and measures,
// in the same run: a bare ordered-consumer read of the whole stream; a full
// rebuild of every projection from it; bare Pebble batched writes of the keys
// the rebuild produced; and opening the rebuilt store again after a clean
// stop.
func Rebuild(ctx context.Context, cfg Config) (*RebuildResult, error) {
	cfg.EnsureDefaults()
	ds, b, err := GenerateStarted(ctx, cfg.Dir, cfg.Events, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	log := events.New(b.JetStream())
	n := ds.Events

	// Rounds alternate the raw read and the rebuild and keep each one's best,
	// so both run with the stream as warm as it gets and a noisy moment on the
	// machine decides nothing. Each starts from a collected heap with no store
	// open: a heap still holding the last rebuild's objects made the next raw
	// read collect less often, and faster. The rebuild without the audit
	// projection runs right beside the full one in each round: the audit's
	// cost is the median of the rounds' ratios. Each rebuild closes its store
	// when it is done, so neither runs beside the other's compactions.
	dir := filepath.Join(ds.Dir, "projections") // where sylk looks for them
	var read, rebuild eventbench.Measure
	var audit []eventbench.Round
	for round := range cfg.Rounds {
		cfg.Progress(fmt.Sprintf("round %d/%d: raw ordered-consumer read of %d events", round+1, cfg.Rounds, n))
		runtime.GC()
		r, err := RawRead(ctx, b.JetStream(), n)
		if err != nil {
			return nil, err
		}
		read = eventbench.Faster(read, r)
		// Each side runs twice a round, mirrored (with, without, without,
		// with; the next round the other way round): neither side always
		// runs on the heap and caches the other left, nor always first after
		// the raw read. In rounds of one run each, the side that went first
		// came out slower (quiet runs: the audit's ratio 0.895 on average
		// where it went first, 0.985 where it went second), and an odd
		// number of rounds put one side first in most of them.
		var pair eventbench.Round
		err = pair.RunMirrored(round, func() (eventbench.Measure, error) {
			cfg.Progress(fmt.Sprintf("round %d/%d: sylk rebuild of every projection from %d events", round+1, cfg.Rounds, n))
			m, err := rebuildInto(ctx, dir, log, n, cfg.Logger, false)
			if err == nil {
				rebuild = eventbench.Faster(rebuild, m)
			}
			return m, err
		}, func() (eventbench.Measure, error) {
			cfg.Progress(fmt.Sprintf("round %d/%d: sylk rebuild without the audit projection", round+1, cfg.Rounds))
			return rebuildInto(ctx, dir+"-noaudit", log, n, cfg.Logger, true, projections.Audit)
		})
		if err != nil {
			return nil, err
		}
		audit = append(audit, pair)
	}

	cfg.Progress("raw Pebble batched writes of the same keys")
	store, err := projections.Open(ctx, projections.Options{Dir: dir, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	write, err := rawWrites(store, filepath.Join(cfg.Dir, fmt.Sprintf("raw-%d", n)), n)
	if err != nil {
		store.Close()
		return nil, err
	}
	if err := store.Close(); err != nil {
		return nil, err
	}
	slower := read
	if write.PerSec < read.PerSec {
		slower = write
	}
	res := &RebuildResult{Store: dir, Data: ds.Dir, Comparisons: []eventbench.Comparison{
		eventbench.Compare(fmt.Sprintf("rebuild vs slower raw part (%d events)", n), rebuild, slower, TargetRebuild),
		eventbench.Compare(fmt.Sprintf("rebuild vs raw ordered read (%d events)", n), rebuild, read, TargetRebuildRead),
		eventbench.Compare(fmt.Sprintf("rebuild vs raw pebble writes (%d events)", n), rebuild, write, 0),
		eventbench.PairedRounds(fmt.Sprintf("rebuild with vs without audit (%d events)", n), TargetAuditRebuild, audit),
	}}

	cfg.Progress("start-up after a clean stop")
	res.Startup, err = startup(ctx, dir, log, n, cfg.Logger)
	if err != nil {
		return nil, err
	}
	res.Comparisons = append(res.Comparisons, StartupComparison(res.Startup))
	return res, nil
}

// rebuildOptions are the options `sylk projections rebuild` opens a store
// with (its Go memory limit is measured by the rebuild process's report).
func rebuildOptions(dir string, log *slog.Logger) projections.Options {
	return projections.Options{Dir: dir, Logger: log}.ForRebuild()
}

// rebuildInto measures a rebuild of every projection but skip into a
// fresh store in dir. The store is closed after, its compactions finished
// (the next measure does not share the machine with them), and with remove
// removed.
func rebuildInto(ctx context.Context, dir string, log *events.Log, n int, logger *slog.Logger, remove bool, skip ...string) (eventbench.Measure, error) {
	os.RemoveAll(dir)
	if remove {
		defer os.RemoveAll(dir)
	}
	o := rebuildOptions(dir, logger)
	o.Skip = skip
	store, err := projections.Open(ctx, o)
	if err != nil {
		return eventbench.Measure{}, err
	}
	runtime.GC()
	name := "sylk rebuild (read, decode, fold, write, sync)"
	if len(skip) > 0 {
		name = fmt.Sprintf("sylk rebuild without %s", strings.Join(skip, ", "))
	}
	m, err := eventbench.Time(name, n, func() error {
		return store.Projector(log).Rebuild(ctx, nil)
	})
	return m, errors.Join(err, store.Close())
}

// StartupComparison states start-up as a comparison with a one-second budget:
// ratio = 1 s / the time it took.
func StartupComparison(s *StartupReport) eventbench.Comparison {
	sylk := eventbench.Measure{Name: fmt.Sprintf("open + catch up + first query, %d events projected", s.Events), Ops: 1, Seconds: s.Seconds}
	if s.Seconds > 0 {
		sylk.PerSec = 1 / s.Seconds
	}
	budget := eventbench.Measure{Name: "budget: ready within 1 s", Ops: 1, Seconds: 1, PerSec: 1}
	return eventbench.Compare("start-up after a clean stop", sylk, budget, TargetStartup)
}

func measure(name string, ops int, d time.Duration) eventbench.Measure {
	m := eventbench.Measure{Name: name, Ops: ops, Seconds: d.Seconds()}
	if d > 0 {
		m.PerSec = float64(ops) / d.Seconds()
	}
	return m
}

// RawRead reads the whole stream, n messages, with a bare ordered consumer:
// the baseline of every fold and replay of it.
func RawRead(ctx context.Context, js jetstream.JetStream, n int) (eventbench.Measure, error) {
	m, err := eventbench.Time("jetstream ordered consumer read", n, func() error {
		cons, err := js.OrderedConsumer(ctx, broker.Stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		it, err := cons.Messages()
		if err != nil {
			return err
		}
		defer it.Stop()
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				return err
			}
			md, err := msg.Metadata()
			if err != nil {
				return err
			}
			if len(msg.Data()) == 0 {
				return fmt.Errorf("empty message at seq %d", md.Sequence.Stream)
			}
			if md.NumPending == 0 {
				return nil
			}
		}
	})
	return m, err
}

// rawWrites writes every key of the rebuilt store into a fresh Pebble with the
// same memtable, cache and L0 options, in batches of the rebuild's size limit,
// without sync, then syncs once. Only the writes are timed: the keys are read
// from the store in chunks between them.
func rawWrites(store *projections.Store, dir string, events int) (eventbench.Measure, error) {
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	o := &pebble.Options{MemTableSize: projections.DefaultMemTableBytes, Logger: quietLogger{}, FormatMajorVersion: pebble.FormatNewest}
	o.L0CompactionThreshold, o.L0StopWritesThreshold = projections.DefaultL0CompactionThreshold, 3*projections.DefaultL0CompactionThreshold // as the store has them
	cache := pebble.NewCache(projections.DefaultBlockCacheBytes)
	defer cache.Unref()
	o.Cache = cache
	db, err := pebble.Open(dir, o)
	if err != nil {
		return eventbench.Measure{}, err
	}
	defer db.Close()
	var elapsed time.Duration
	var keys int
	b := db.NewBatch()
	const chunk = 256 << 20
	err = store.Dump(func(kvs [][2][]byte) error {
		keys += len(kvs)
		start := time.Now()
		for _, kv := range kvs {
			if err := b.Set(kv[0], kv[1], nil); err != nil {
				return err
			}
			if b.Len() >= projections.DefaultBatchBytes {
				if err := b.Commit(pebble.NoSync); err != nil {
					return err
				}
				b.Close()
				b = db.NewBatch()
			}
		}
		elapsed += time.Since(start)
		return nil
	}, chunk)
	if err != nil {
		return eventbench.Measure{}, err
	}
	start := time.Now()
	if err := b.Commit(pebble.Sync); err != nil {
		return eventbench.Measure{}, err
	}
	b.Close()
	elapsed += time.Since(start)
	return measure(fmt.Sprintf("pebble batched writes of the same %d keys", keys), events, elapsed), nil
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// startup opens the cleanly closed store, catches up (nothing to fold) and
// answers a first query.
func startup(ctx context.Context, dir string, log *events.Log, n int, logger *slog.Logger) (*StartupReport, error) {
	runtime.GC()
	start := time.Now()
	store, err := projections.Open(ctx, projections.Options{Dir: dir, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	was := store.Cursor()
	applied, err := store.Projector(log).CatchUp(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := store.Session(ctx, SessionID(0)); err != nil {
		return nil, err
	}
	return &StartupReport{Events: n, Seconds: time.Since(start).Seconds(), Replayed: applied - was}, nil
}

// Replay measures, at each stream size, reading one session's events from its
// session log against a subject-filtered ordered consumer reading the same
// session from the same stream, over Samples different sessions.
func Replay(ctx context.Context, cfg Config) ([]eventbench.Comparison, error) {
	cfg.EnsureDefaults()
	var out []eventbench.Comparison
	var first, last eventbench.Measure
	for i, n := range cfg.Sizes {
		ds, err := Generate(ctx, cfg.Dir, n, cfg.Progress)
		if err != nil {
			return nil, err
		}
		c, err := replayAt(ctx, cfg, ds)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		if i == 0 {
			first = c.Sylk
		}
		last = c.Sylk
	}
	if len(cfg.Sizes) > 1 {
		first.Name = fmt.Sprintf("session log replay at %d events", cfg.Sizes[0])
		last.Name = fmt.Sprintf("session log replay at %d events", cfg.Sizes[len(cfg.Sizes)-1])
		out = append(out, eventbench.Compare(fmt.Sprintf("replay at %d vs at %d events (flat = 1)", cfg.Sizes[len(cfg.Sizes)-1], cfg.Sizes[0]), last, first, TargetReplayFlat))
	}
	return out, nil
}

func replayAt(ctx context.Context, cfg Config, ds *Dataset) (eventbench.Comparison, error) {
	b, err := ds.Start(ctx)
	if err != nil {
		return eventbench.Comparison{}, err
	}
	defer b.Close()
	log := events.New(b.JetStream())
	dir := filepath.Join(ds.Dir, "projections")
	store, err := projections.Open(ctx, projections.Options{Dir: dir, Logger: cfg.Logger})
	if err != nil {
		return eventbench.Comparison{}, err
	}
	if store.Cursor() < uint64(ds.Events) {
		cfg.Progress(fmt.Sprintf("projecting %d events for the session log", ds.Events))
	}
	if _, err := store.Projector(log).CatchUp(ctx); err != nil {
		store.Close()
		return eventbench.Comparison{}, err
	}
	// Reopen, so the replay starts with an empty block cache.
	if err := store.Close(); err != nil {
		return eventbench.Comparison{}, err
	}
	if store, err = projections.Open(ctx, projections.Options{Dir: dir, Logger: cfg.Logger}); err != nil {
		return eventbench.Comparison{}, err
	}
	defer store.Close()

	samples := min(cfg.Samples, ds.Sessions)
	spread := func(k int) func(j int) string {
		return func(j int) string { return SessionID((j*ds.Sessions/k + ds.Sessions/(2*k)) % ds.Sessions) }
	}
	pick := spread(samples)
	logSamples := min(10*samples, ds.Sessions)
	logPick := spread(logSamples)
	ops := samples * PerSession
	cfg.Progress(fmt.Sprintf("replay of %d sessions of %d events out of %d", samples, PerSession, ds.Events))
	sylk, err := eventbench.Time("session log range scan", logSamples*PerSession, func() error {
		for j := range logSamples {
			page, err := store.SessionLog(ctx, projections.LogQuery{Session: logPick(j)})
			if err != nil {
				return err
			}
			if len(page.Entries) != PerSession {
				return fmt.Errorf("session %s: %d events in its log, want %d", logPick(j), len(page.Entries), PerSession)
			}
		}
		return nil
	})
	if err != nil {
		return eventbench.Comparison{}, err
	}
	js := b.JetStream()
	base, err := eventbench.Time("subject-filtered ordered consumer", ops, func() error {
		for j := range samples {
			got, err := filteredRead(ctx, js, pick(j))
			if err != nil {
				return err
			}
			if got != PerSession {
				return fmt.Errorf("session %s: %d events from the stream, want %d", pick(j), got, PerSession)
			}
		}
		return nil
	})
	if err != nil {
		return eventbench.Comparison{}, err
	}
	return eventbench.Compare(fmt.Sprintf("replay one %d-event session of %d", PerSession, ds.Events), sylk, base, TargetReplay), nil
}

// filteredRead reads one session with a subject-filtered ordered consumer.
func filteredRead(ctx context.Context, js jetstream.JetStream, session string) (int, error) {
	cons, err := js.OrderedConsumer(ctx, broker.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.Prefix + "." + session + ".>"}})
	if err != nil {
		return 0, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	if info.NumPending == 0 {
		return 0, nil
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	n := 0
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return n, err
		}
		if len(msg.Data()) > 0 {
			n++
		}
		md, err := msg.Metadata()
		if err != nil {
			return n, err
		}
		if md.NumPending == 0 {
			return n, nil
		}
	}
}
