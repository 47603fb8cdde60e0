package bench

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/librarian/indexbench"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// indexReport is what `sylk bench index --json` prints.
type indexReport struct {
	benchReport
	Index *indexbench.Report `json:"index"`
}

func newBenchIndexCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var edits, searches, rounds int
	cmd := &cobra.Command{
		Use:   "index",
		Short: "The Librarian's code index vs grep -r over the same generated tree",
		Long: `Generates a tree of --events files (Go packages, Markdown, Python and text),
reads every file once (unmeasured, so both sides read from a warm cache),
then, in the same run, --rounds rounds of, back to back:

  - grep -r reading every file (the baseline; its CPU per file is grep's own);
  - Sylk indexing the tree into a fresh store: reads and hashes every file,
    redacts secrets, extracts terms and Go declarations, calls and imports,
    records them as index_update events on an embedded server (sync
    interval), and waits until the code projection has folded them.

The side that goes first alternates from round to round, each round's store
is closed before the other side runs, and the ratio is the median of the
rounds' ratios (every round is listed). Target: at least 0.25x grep's speed.
For information, the two sides' CPU a file over the rounds (grep's own, from
its rusage) as files per CPU second: grep reads on one core and the index
works on all of them, so its speed is at most the cores times that ratio.
Then, on an index made unmeasured:
  - --edits times an edit of one file until the index answers with it
    (target: p99 under 50 ms);
  - --searches times queries (ranked text, symbols, callers) on that index
    (targets: p50 under 10 ms, p99 under 50 ms).

A p99 is the 99th percentile of the samples: of fewer than 100 it is their
maximum.

A latency is compared with its budget as a speed (1/latency), so a ratio of
at least 1 meets it. Also printed: the stream bytes the index events take per
source byte.`,
		Example: `  sylk bench index
  sylk bench index --events 2000 --json | jq '.comparisons[] | {name, ratio}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			cs, rep, err := indexbench.Run(cmd.Context(), indexbench.Config{DataDir: dir, Files: opts.Events, Edits: edits, Searches: searches, Rounds: rounds}, opts.progress(f.IO))
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(indexReport{benchReport: newBenchReport("index", cs), Index: rep})
			}
			if err := printComparisons(f, opts, "index", cs); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "%d files, %d source bytes; %d index_update events, %d stream bytes (%.2f per source byte)\n",
				rep.Files, rep.SourceBytes, rep.Events, rep.StreamBytes, float64(rep.StreamBytes)/float64(max(rep.SourceBytes, 1)))
			fmt.Fprintf(f.IO.Out, "update of one file: p50 %.1f ms, p99 %.1f ms; search: p50 %.2f ms, p99 %.2f ms\n",
				rep.UpdateP50MS, rep.UpdateP99MS, rep.SearchP50MS, rep.SearchP99MS)
			return nil
		},
	}
	opts.bind(cmd, 20000)
	cmd.Flags().IntVar(&edits, "edits", 200, "one-file updates to time")
	cmd.Flags().IntVar(&searches, "searches", 500, "searches to time")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "rounds of grep -r and a fresh index (the median of their ratios decides)")
	return cmd
}
