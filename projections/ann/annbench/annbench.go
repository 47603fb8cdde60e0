// Package annbench measures approximate nearest-neighbour search (the IVF
// index of package ann) against the exact scan, in the same run, on
// generated vectors shaped like text embeddings.
package annbench

import (
	"context"
	"fmt"
	"time"

	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections/ann"
)

// Config sizes the benchmark.
type Config struct {
	Vectors, Dims, Queries, K int
	// Probes (0: ann.DefaultProbes) and Lists (0: ann's default).
	Probes, Lists int
	Seed          uint64
}

// Targets of the comparisons.
const (
	TargetSpeed  = 20   // the index's queries per second over the exact scan's
	TargetRecall = 0.95 // recall@K against the exact scan
)

// Report is what a run measured besides its comparisons.
type Report struct {
	Vectors int `json:"vectors"`
	Dims    int `json:"dims"`
	Queries int `json:"queries"`
	K       int `json:"k"`
	Lists   int `json:"lists"`
	Probes  int `json:"probes"`
	// BuildSeconds and BuildCPUSeconds: training and filling the index.
	BuildSeconds    float64 `json:"build_seconds"`
	BuildCPUSeconds float64 `json:"build_cpu_seconds"`
	Recall          float64 `json:"recall"`
	// FilteredRecall: with a filter keeping one label of four;
	// RareRecall: with one keeping 1% of the vectors.
	FilteredRecall float64 `json:"filtered_recall"`
	RareRecall     float64 `json:"rare_recall"`
	ExactMS        float64 `json:"exact_ms_per_query"`
	IndexMS        float64 `json:"index_ms_per_query"`
}

// Run generates the vectors and queries, builds the index, and times the
// queries through it and through the exact scan.
func Run(ctx context.Context, cfg Config, progress func(string)) ([]eventbench.Comparison, *Report, error) {
	if cfg.Vectors < 1 || cfg.Dims < 1 || cfg.Queries < 1 || cfg.K < 1 {
		return nil, nil, fmt.Errorf("vectors, dims, queries and k must be positive: %+v", cfg)
	}
	progress(fmt.Sprintf("generating %d vectors of %d dimensions and %d queries", cfg.Vectors, cfg.Dims, cfg.Queries))
	g := ann.Generate(cfg.Vectors, cfg.Dims, cfg.Queries, cfg.Seed)
	for i := 0; i < len(g.Labels); i += 100 {
		g.Labels[i] = rareLabel
	}
	rep := &Report{Vectors: cfg.Vectors, Dims: cfg.Dims, Queries: cfg.Queries, K: cfg.K}

	progress("building the index")
	ix := ann.New(cfg.Dims, ann.Options{Lists: cfg.Lists, Probes: cfg.Probes, Seed: cfg.Seed})
	cpu0, t0 := eventbench.ProcessCPU(), time.Now()
	ix.Build(g.IDs, g.Vecs, g.Labels)
	rep.BuildSeconds, rep.BuildCPUSeconds = time.Since(t0).Seconds(), (eventbench.ProcessCPU() - cpu0).Seconds()
	rep.Lists, rep.Probes = ix.Lists(), ix.Probes()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}

	progress("exact scan")
	exact, base, err := timeQueries(ctx, "exact scan", g.Queries, 1, func(q []float32) []ann.Hit { return ann.Exact(q, g.Vecs, g.IDs, cfg.K) })
	if err != nil {
		return nil, nil, err
	}
	progress("index search")
	found, sylk, err := timeQueries(ctx, fmt.Sprintf("IVF, %d of %d lists", rep.Probes, rep.Lists), g.Queries, indexRounds, func(q []float32) []ann.Hit { return ix.Search(q, cfg.K, nil) })
	if err != nil {
		return nil, nil, err
	}
	rep.Recall = meanRecall(found, exact)
	rep.ExactMS, rep.IndexMS = 1000/base.PerSec, 1000/sylk.PerSec

	progress("filtered search (one label of four)")
	fsylk, fbase, err := filtered(ctx, g, ix, cfg.K, "one label", func(l string) bool { return l == "d1" }, &rep.FilteredRecall)
	if err != nil {
		return nil, nil, err
	}
	progress("filtered search (1% of the vectors)")
	rsylk, rbase, err := filtered(ctx, g, ix, cfg.K, "1% of the vectors", func(l string) bool { return l == rareLabel }, &rep.RareRecall)
	if err != nil {
		return nil, nil, err
	}

	name := fmt.Sprintf("vector search k=%d, %dx%d", cfg.K, cfg.Vectors, cfg.Dims)
	n := len(g.Queries)
	return []eventbench.Comparison{
		eventbench.Compare(name+": IVF vs exact scan", sylk, base, TargetSpeed),
		eventbench.Compare(name+": recall@k vs exact scan", share("IVF recall", rep.Recall, n), share("exact scan", 1, n), TargetRecall),
		eventbench.Compare(name+": filtered IVF vs exact scan of the label", fsylk, fbase, 0),
		eventbench.Compare(name+": filtered recall@k", share("IVF filtered recall", rep.FilteredRecall, n), share("exact scan", 1, n), TargetRecall),
		eventbench.Compare(name+": IVF filtered to 1% vs exact scan of those", rsylk, rbase, 0),
		eventbench.Compare(name+": recall@k filtered to 1%", share("IVF filtered recall", rep.RareRecall, n), share("exact scan", 1, n), TargetRecall),
	}, rep, nil
}

// rareLabel is the label of every hundredth vector: a filter keeping 1%.
const rareLabel = "rare"

// filtered times the index's searches with the filter keep against the
// exact scan of the vectors it keeps, and sets *recall.
func filtered(ctx context.Context, g *ann.Generated, ix *ann.Index, k int, what string, keep func(string) bool, recall *float64) (sylk, base eventbench.Measure, err error) {
	var ids []string
	var vecs [][]float32
	for i, l := range g.Labels {
		if keep(l) {
			ids, vecs = append(ids, g.IDs[i]), append(vecs, g.Vecs[i])
		}
	}
	exact, base, err := timeQueries(ctx, "exact scan of "+what, g.Queries, 1, func(q []float32) []ann.Hit { return ann.Exact(q, vecs, ids, k) })
	if err != nil {
		return sylk, base, err
	}
	found, sylk, err := timeQueries(ctx, "IVF filtered to "+what, g.Queries, indexRounds, func(q []float32) []ann.Hit { return ix.Search(q, k, keep) })
	*recall = meanRecall(found, exact)
	return sylk, base, err
}

// timeQueries runs search on each query, timed, and returns the answers.
// The queries are run rounds times over (the same answers each time), so a
// fast search is timed over a span long enough for the machine's other
// work to weigh on it as on the slow one.
func timeQueries(ctx context.Context, name string, queries [][]float32, rounds int, search func([]float32) []ann.Hit) ([][]ann.Hit, eventbench.Measure, error) {
	out := make([][]ann.Hit, len(queries))
	m, err := eventbench.Time(name, rounds*len(queries), func() error {
		for range rounds {
			for i, q := range queries {
				out[i] = search(q)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return out, m, err
}

// indexRounds is how many times over the index's searches are timed (the
// exact scan's, each tens of times longer, once).
const indexRounds = 20

// meanRecall is the mean recall of found against exact, query by query.
func meanRecall(found, exact [][]ann.Hit) float64 {
	sum := 0.0
	for i := range found {
		sum += ann.Recall(found[i], exact[i])
	}
	return sum / float64(max(len(found), 1))
}

// share is a measure whose "speed" is a share (a recall), so that a
// comparison's ratio is the recall against the exact scan's 1.
func share(name string, v float64, ops int) eventbench.Measure {
	return eventbench.Measure{Name: name, Ops: ops, PerSec: v}
}
