package bench

import (
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections/projbench"
)

func newBenchAuditCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "audit verify vs a raw read of the same stream",
		Long: `Generates a stream of --events events (interleaved 50-event sessions, as for
'sylk bench rebuild'; reused from --dir when it exists), signs it as 'sylk
serve' does (a checkpoint every 100 sequences), then measures in the same run a
full 'sylk audit verify' (read every message, hash it, chain it, check each
checkpoint's leaves and signature) against a bare ordered-consumer read of the
same messages. Target: verify >= 0.5x the raw read. Three rounds; each side
keeps its best.

The audit projection's cost to a rebuild is in 'sylk bench rebuild' (with vs
without audit, target >= 0.9).`,
		Example: `  sylk bench audit --events 200000 --json | jq '.comparisons[0].ratio'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			cs, err := projbench.AuditVerify(cmd.Context(), projbench.Config{Dir: dir, Events: opts.Events, Progress: opts.progress(f.IO)})
			if err != nil {
				return err
			}
			return printComparisons(f, opts, "audit", cs)
		},
	}
	opts.bind(cmd, 500_000)
	return cmd
}
