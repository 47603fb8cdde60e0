// Package bench is `sylk bench`: Sylk's paths measured against their raw
// baselines (bare JetStream, bare Pebble) in the same run.
package bench

import (
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

func NewCmdBench(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Sylk against its raw baselines (bare JetStream, bare Pebble)",
		Long: `Each benchmark runs Sylk's path and its raw baseline in the same run, on a fresh
data directory, and reports both with ratio = Sylk's speed / baseline's speed
(higher is better). The machine is noisy: compare ratios, not times.`,
	}
	cmd.AddCommand(newBenchAppendCmd(f), newBenchRouteCmd(f), newBenchWebCmd(f), newBenchWebViewersCmd(), newBenchDAGCmd(f), newBenchResumeCmd(f))
	cmd.AddCommand(newBenchRebuildCmd(f), newBenchReplayCmd(f), newBenchIndexCmd(f), newBenchAuditCmd(f))
	cmd.AddCommand(newBenchForkCmd(f), newBenchReexecuteCmd(f), newBenchVectorCmd(f))
	return cmd
}
