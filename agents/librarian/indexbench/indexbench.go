// Package indexbench measures the Librarian's code index against grep in the
// same run: indexing a generated tree (read, extract, record as events, fold
// into the projection), updating one edited file, and searching.
package indexbench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Config sizes the benchmark.
type Config struct {
	DataDir string
	// Files in the generated tree (default 20000).
	Files int
	// Edits: one-file updates measured (default 200: a p99 of fewer
	// samples is their maximum, one stall of a loaded machine).
	Edits int
	// Searches measured (default 500).
	Searches int
	// Rounds of the indexing comparison (default 3): grep -r and a fresh
	// index back to back, alternating which goes first; the ratio is the
	// median of the rounds'.
	Rounds int
}

func (c *Config) ensureDefaults() {
	if c.Files == 0 {
		c.Files = 20000
	}
	if c.Edits == 0 {
		c.Edits = 200
	}
	if c.Searches == 0 {
		c.Searches = 500
	}
	if c.Rounds == 0 {
		c.Rounds = 3
	}
}

// Targets.
const (
	// TargetIndexVsGrep: indexing at least a quarter of grep -r's speed.
	TargetIndexVsGrep = 0.25
	// Latency budgets: an update of one file, and search p50 and p99.
	BudgetUpdate    = 50 * time.Millisecond
	BudgetSearchP50 = 10 * time.Millisecond
	BudgetSearchP99 = 50 * time.Millisecond
)

// Report holds the figures that are not comparisons.
type Report struct {
	Files       int     `json:"files"`
	SourceBytes int64   `json:"source_bytes"`
	Events      int     `json:"events"`
	StreamBytes uint64  `json:"stream_bytes"`
	UpdateP50MS float64 `json:"update_p50_ms"`
	UpdateP99MS float64 `json:"update_p99_ms"`
	SearchP50MS float64 `json:"search_p50_ms"`
	SearchP99MS float64 `json:"search_p99_ms"`
}

// Run runs the benchmark on an embedded server (sync interval) with the
// projector.
func Run(ctx context.Context, cfg Config, progress func(string)) ([]eventbench.Comparison, *Report, error) {
	cfg.ensureDefaults()
	tree := filepath.Join(cfg.DataDir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return nil, nil, err
	}
	progress(fmt.Sprintf("generating a tree of %d files", cfg.Files))
	g, err := librarian.GenerateTree(tree, cfg.Files, 1)
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{Files: len(g.Files)}
	for _, f := range g.Files {
		if st, err := os.Stat(filepath.Join(tree, f)); err == nil {
			rep.SourceBytes += st.Size()
		}
	}
	// Every file is read once, unmeasured, so the first measured side does
	// not pay for a cold cache the other does not.
	if _, err := grepOnce(tree, len(g.Files)); err != nil {
		return nil, nil, err
	}
	// Rounds: grep -r, and an index of the whole tree into a store of its
	// own, back to back, the side that goes first alternating; the ratio
	// is the median of the rounds'. A round's store is closed (its server
	// and Pebble stopped) before the other side runs.
	cmp, err := eventbench.Paired("index a generated tree vs grep -r, files/s", cfg.Rounds, TargetIndexVsGrep,
		func(round int) (eventbench.Measure, error) {
			progress(fmt.Sprintf("round %d: indexing the tree: read, extract, record, fold", round+1))
			s, err := openIndexStore(ctx, filepath.Join(cfg.DataDir, fmt.Sprintf("index%d", round)), tree)
			if err != nil {
				return eventbench.Measure{}, err
			}
			defer s.close()
			rep.Events = 0
			m, err := eventbench.Time("sylk index (files)", len(g.Files), func() error { return s.update(ctx, nil, &rep.Events) })
			if err == nil {
				rep.StreamBytes, err = s.streamBytes(ctx)
			}
			return m, err
		},
		func(round int) (eventbench.Measure, error) {
			progress(fmt.Sprintf("round %d: grep -r over the tree (the baseline)", round+1))
			return grepOnce(tree, len(g.Files))
		})
	if err != nil {
		return nil, nil, err
	}
	out := []eventbench.Comparison{cmp, cpuComparison(cmp)}

	// The updates and searches run on an index of their own, made
	// unmeasured.
	progress("indexing the tree for the updates and searches")
	last, err := openIndexStore(ctx, filepath.Join(cfg.DataDir, "index"), tree)
	if err != nil {
		return nil, nil, err
	}
	defer last.close()
	var initial int
	if err := last.update(ctx, nil, &initial); err != nil {
		return nil, nil, err
	}
	ix, store := last.ix, last.store

	progress(fmt.Sprintf("%d one-file updates", cfg.Edits))
	var lat []time.Duration
	names := slices.Sorted(maps.Keys(g.Defines))
	for i := range cfg.Edits {
		rel := g.Defines[names[i*7%len(names)]]
		full := filepath.Join(tree, rel)
		src, err := os.ReadFile(full)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(full, append(src, fmt.Sprintf("\n// edit %d\nfunc Edited%d() {}\n", i, i)...), 0o644); err != nil {
			return nil, nil, err
		}
		start := time.Now()
		if err := last.update(ctx, []string{rel}, &rep.Events); err != nil {
			return nil, nil, err
		}
		lat = append(lat, time.Since(start))
	}
	up50, up99 := percentile(lat, 0.5), percentile(lat, 0.99)
	rep.UpdateP50MS, rep.UpdateP99MS = ms(up50), ms(up99)
	out = append(out, budget("update of one edited file, p99 vs 50 ms", up99, BudgetUpdate, len(lat)))

	progress(fmt.Sprintf("%d searches", cfg.Searches))
	rng := rand.New(rand.NewPCG(2, 3))
	lat = lat[:0]
	for i := range cfg.Searches {
		q := projections.CodeQuery{Root: ix.Root, Kind: projections.CodeSearch, Text: librarian.Word(rng) + " " + librarian.Word(rng)}
		switch i % 4 {
		case 1:
			q = projections.CodeQuery{Root: ix.Root, Kind: projections.CodeSymbol, Text: names[rng.IntN(len(names))]}
		case 2:
			q = projections.CodeQuery{Root: ix.Root, Kind: projections.CodeCallers, Text: names[rng.IntN(len(names))]}
		case 3:
			q.Text = strings.ToLower(names[rng.IntN(len(names))])
		}
		start := time.Now()
		if _, err := store.Code(ctx, q); err != nil {
			return nil, nil, err
		}
		lat = append(lat, time.Since(start))
	}
	s50, s99 := percentile(lat, 0.5), percentile(lat, 0.99)
	rep.SearchP50MS, rep.SearchP99MS = ms(s50), ms(s99)
	out = append(out, budget("search p50 vs 10 ms", s50, BudgetSearchP50, len(lat)), budget("search p99 vs 50 ms", s99, BudgetSearchP99, len(lat)))
	return out, rep, nil
}

// grepOnce times grep -r reading every file of tree (for a string no file
// holds). Its CPU per file is grep's own (the child's user and system time).
func grepOnce(tree string, files int) (eventbench.Measure, error) {
	cmd := exec.Command("grep", "-r", "-F", "-c", "zq-no-file-holds-this-qz", tree)
	m, err := eventbench.Time("grep -r (files)", files, func() error {
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return nil // no match: what we asked for
		}
		return err
	})
	if err != nil {
		return m, fmt.Errorf("grep: %w", err)
	}
	if st := cmd.ProcessState; st != nil && files > 0 {
		m.CPUPerOp = float64(st.UserTime()+st.SystemTime()) / float64(time.Microsecond) / float64(files)
	}
	m.AllocsPerOp, m.BytesPerOp = 0, 0 // the bench's own, not grep's
	return m, nil
}

// indexStore is an embedded server (sync interval), a store and its
// projector, and an indexer of the tree.
type indexStore struct {
	b      *broker.Broker
	store  *projections.Store
	log    *events.Log
	ix     *librarian.Indexer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	dir    string
}

func openIndexStore(ctx context.Context, dir, tree string) (*indexStore, error) {
	s := &indexStore{dir: dir}
	var err error
	if s.ix, err = librarian.NewIndexer(tree); err != nil {
		return nil, err
	}
	s.ix.GCPercent = librarian.CommandGCPercent // as sylk index's
	if s.b, err = broker.Start(ctx, broker.Options{DataDir: dir, Listen: broker.ListenNone, Sync: broker.SyncInterval, Name: "bench"}); err != nil {
		return nil, err
	}
	if s.store, err = projections.Open(ctx, projections.Options{Dir: filepath.Join(dir, "projections")}); err != nil {
		s.b.Close()
		return nil, err
	}
	s.log = events.New(s.b.JetStream())
	pctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.wg.Go(func() { s.store.Projector(s.log).Run(pctx) })
	return s, nil
}

// update indexes files (all when none), records the updates, counting
// their events in n, and waits until the projection has folded them.
func (s *indexStore) update(ctx context.Context, files []string, n *int) error {
	_, seq, err := librarian.Update(ctx, s.store, s.ix, files, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
		*n += len(ups)
		return librarian.Record(ctx, s.log, "_", librarian.Name, time.Now(), ups)
	})
	if err == nil && seq > 0 {
		err = s.store.WaitFor(ctx, seq)
	}
	return err
}

// streamBytes is how many bytes the stream holds.
func (s *indexStore) streamBytes(ctx context.Context) (uint64, error) {
	st, err := s.b.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		return 0, err
	}
	si, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return si.State.Bytes, nil
}

// close stops the projector and the server and removes their data (a
// round's index is not needed once the next starts).
func (s *indexStore) close() {
	s.cancel()
	s.wg.Wait()
	s.store.Close()
	s.b.Close()
	os.RemoveAll(s.dir)
}

// cpuComparison compares the CPU each side spent a file over the rounds,
// for information: grep reads on one core, the index works on every core,
// so its speed is at most the cores times this ratio.
func cpuComparison(c eventbench.Comparison) eventbench.Comparison {
	perCPUSecond := func(m eventbench.Measure) eventbench.Measure {
		m.PerSec = 1e6 / max(m.CPUPerOp, 1e-9)
		return m
	}
	return eventbench.Compare("index vs grep -r, files per CPU second", perCPUSecond(c.Sylk), perCPUSecond(c.Baseline), 0)
}

// budget compares a latency with its budget as speeds (1/latency), so the
// ratio is at least 1 when the latency is within the budget.
func budget(name string, got, limit time.Duration, ops int) eventbench.Comparison {
	sylk := eventbench.Measure{Name: "sylk", Ops: ops, Seconds: got.Seconds(), PerSec: 1 / max(got.Seconds(), 1e-9)}
	base := eventbench.Measure{Name: "budget " + limit.String(), Ops: 1, Seconds: limit.Seconds(), PerSec: 1 / limit.Seconds()}
	return eventbench.Compare(name, sylk, base, 1)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
