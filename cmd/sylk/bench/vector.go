package bench

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections/ann"
	"github.com/sylk/sylk/projections/ann/annbench"
)

// vectorReport is what `sylk bench vector --json` prints.
type vectorReport struct {
	benchReport
	Vector *annbench.Report `json:"vector"`
}

func newBenchVectorCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	cfg := annbench.Config{}
	cmd := &cobra.Command{
		Use:   "vector",
		Short: "Approximate nearest-neighbour search (IVF) vs the exact scan, same vectors, same run",
		Long: `Generates --events unit vectors of --dims dimensions shaped like text
embeddings (topics of subtopics of about 100 texts; a text is its subtopic
plus noise of about its own length), and --queries more from the same
subtopics, then in the same run:

  - the exact scan: every vector's cosine with each query, the k best kept
    (the baseline, and the truth recall is measured against);
  - the IVF index: k-means centroids in two levels, each vector in its
    nearest centroid's list; a query reads the --probes nearest lists (its
    queries are timed 20 times over, so that they last long enough for the
    machine's other work to weigh on them as on the exact scan's). Targets:
    at least 20x the exact scan's queries per second, recall@k at least
    0.95;
  - both again with a filter keeping one label of four (as a domain or
    type filter would), and with one keeping 1% of the vectors: recall
    target 0.95 (the filter is applied inside the search, so a rare label
    still gets k hits), speed for information.

The index's build time (and CPU) is printed for information. Uniformly random
vectors have no neighbourhoods to find; no index meets the targets on them.`,
		Example: `  sylk bench vector
  sylk bench vector --events 100000 --dims 768 --json | jq '.comparisons[] | {name, ratio, target}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			cfg.Vectors = opts.Events
			cs, rep, err := annbench.Run(cmd.Context(), cfg, opts.progress(f.IO))
			if err != nil {
				return cmdutil.UsageError{Err: err}
			}
			if opts.JSON {
				return f.IO.PrintJSON(vectorReport{benchReport: newBenchReport("vector", cs), Vector: rep})
			}
			if err := printComparisons(f, opts, "vector", cs); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "%d lists, %d probed; built in %.1f s (%.1f s CPU); %.2f ms vs %.2f ms a query; recall %.3f, filtered %.3f, filtered to 1%% %.3f\n",
				rep.Lists, rep.Probes, rep.BuildSeconds, rep.BuildCPUSeconds, rep.IndexMS, rep.ExactMS, rep.Recall, rep.FilteredRecall, rep.RareRecall)
			return nil
		},
	}
	opts.bind(cmd, 100000)
	cmd.Flags().IntVar(&cfg.Dims, "dims", 768, "dimensions of each vector")
	cmd.Flags().IntVar(&cfg.Queries, "queries", 100, "queries timed (each scanned exactly too)")
	cmd.Flags().IntVar(&cfg.K, "k", 10, "neighbours asked for")
	cmd.Flags().IntVar(&cfg.Probes, "probes", ann.DefaultProbes, "lists a query reads")
	cmd.Flags().IntVar(&cfg.Lists, "lists", 0, "lists of the index (0: one per 100 vectors)")
	cmd.Flags().Uint64Var(&cfg.Seed, "seed", 1, "seed of the generated vectors and of k-means")
	return cmd
}
