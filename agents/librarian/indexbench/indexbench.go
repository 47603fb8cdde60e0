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
	progress("grep -r over the tree (the baseline)")
	grep, err := grepTree(tree, len(g.Files))
	if err != nil {
		return nil, nil, err
	}
	data := filepath.Join(cfg.DataDir, "index")
	b, err := broker.Start(ctx, broker.Options{DataDir: data, Listen: broker.ListenNone, Sync: broker.SyncInterval, Name: "bench"})
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(data, "projections")})
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	log := events.New(b.JetStream())
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { store.Projector(log).Run(pctx) })
	defer wg.Wait()
	defer cancel()

	ix, err := librarian.NewIndexer(tree)
	if err != nil {
		return nil, nil, err
	}
	update := func(files []string) error {
		_, seq, err := librarian.Update(ctx, store, ix, files, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
			rep.Events += len(ups)
			return librarian.Record(ctx, log, "_", librarian.Name, time.Now(), ups)
		})
		if err == nil && seq > 0 {
			err = store.WaitFor(ctx, seq)
		}
		return err
	}
	progress("indexing the tree: read, extract, record, fold")
	idx, err := eventbench.Time("sylk index (files)", len(g.Files), func() error { return update(nil) })
	if err != nil {
		return nil, nil, err
	}
	if info, err := b.JetStream().Stream(ctx, broker.Stream); err == nil {
		if si, err := info.Info(ctx); err == nil {
			rep.StreamBytes = si.State.Bytes
		}
	}
	out := []eventbench.Comparison{eventbench.Compare("index a generated tree vs grep -r, files/s", idx, grep, TargetIndexVsGrep)}

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
		if err := update([]string{rel}); err != nil {
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

// grepTree times grep -r reading every file of tree (for a string no file
// holds), the faster of two runs, so both sides read from a warm cache.
func grepTree(tree string, files int) (eventbench.Measure, error) {
	var best eventbench.Measure
	for range 2 {
		m, err := eventbench.Time("grep -r (files)", files, func() error {
			err := exec.Command("grep", "-r", "-F", "-c", "zq-no-file-holds-this-qz", tree).Run()
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
				return nil // no match: what we asked for
			}
			return err
		})
		if err != nil {
			return m, fmt.Errorf("grep: %w", err)
		}
		if best.PerSec < m.PerSec {
			best = m
		}
	}
	return best, nil
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
