package bench

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/agentbench"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// routeReport is what `sylk bench route --json` prints: the comparisons, and
// the DAG benchmark's figures (which have no baseline to be a ratio of).
type routeReport struct {
	benchReport
	DAG *agentbench.DAGReport `json:"dag,omitempty"`
}

func newBenchRouteCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var syncModes []string
	var rate, nodes int
	cmd := &cobra.Command{
		Use:   "route",
		Short: "The routed message path vs raw JetStream, throughput and latency",
		Long: `Appends unaddressed context requests; the Guide routes each to an agent that
answers at once, and the answer is appended: append -> Guide -> agent -> reply.
Throughput is compared with raw JetStream async publish (target ratio >= 0.25);
latency, sampled at a steady rate on both sides, with raw publish-to-delivery
(target: p50 and p99 at most 3x raw, a ratio >= 0.33).

The lines marked "ceiling" run the same two hops in bare JetStream, with
messages of Sylk's shape (body, headers, subjects, consumer filters) and no
runtime at all: each consumer publishes the next hop without waiting and acks
once it is stored. Their ratios are the best any design that stores every hop
can reach on this machine; Sylk's own lines are also compared with them. Each
measure prints the CPU time the process spent per op, the embedded server's
included: when both cores are busy, that cost is what sets the rate.

Then a DAG of --nodes no-op tool nodes (as 'sylk bench dag'): the runtime's own
overhead per node and nodes per second.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			cs, err := agentbench.Route(cmd.Context(), agentbench.RouteConfig{DataDir: dir, Messages: opts.Events, SyncModes: syncModes, LatencyRate: rate}, opts.progress(f.IO))
			if err != nil {
				return err
			}
			var dag *agentbench.DAGReport
			if nodes > 0 {
				if dag, err = agentbench.DAG(cmd.Context(), agentbench.DAGConfig{DataDir: dir, Nodes: nodes}, opts.progress(f.IO)); err != nil {
					return err
				}
			}
			if opts.JSON {
				return f.IO.PrintJSON(routeReport{newBenchReport("route", cs), dag})
			}
			if err := printComparisons(f, opts, "route", cs); err != nil {
				return err
			}
			if dag != nil {
				printDAGReport(f, dag)
			}
			return nil
		},
	}
	opts.bind(cmd, 5000)
	cmd.Flags().StringSliceVar(&syncModes, "sync", []string{broker.SyncInterval, broker.SyncAlways}, "sync modes to measure")
	cmd.Flags().IntVar(&rate, "latency-rate", 1000, "messages per second while sampling latency")
	cmd.Flags().IntVar(&nodes, "nodes", 1000, "nodes of the no-op DAG run afterwards (0: skip it)")
	return cmd
}

func newBenchDAGCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var concurrency int
	cmd := &cobra.Command{
		Use:   "dag",
		Short: "A DAG of no-op tool nodes: overhead per node and nodes per second",
		Long: `Runs a DAG of independent no-op tool nodes (list, in-process) through the
Orchestrator and the Engineer on an embedded server: once one node at a time,
reporting the runtime's own overhead per node (wall time less the tools' time),
once in parallel, reporting nodes per second.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			rep, err := agentbench.DAG(cmd.Context(), agentbench.DAGConfig{DataDir: dir, Nodes: opts.Events, MaxConcurrency: concurrency}, opts.progress(f.IO))
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(map[string]any{"benchmark": "dag", "report": rep})
			}
			printDAGReport(f, rep)
			return nil
		},
	}
	opts.bind(cmd, 1000)
	cmd.Flags().IntVar(&concurrency, "max-concurrency", 16, "the parallel run's max_concurrency")
	return cmd
}

func printDAGReport(f *cmdutil.Factory, rep *agentbench.DAGReport) {
	fmt.Fprintf(f.IO.Out, "DAG of %d no-op nodes one at a time: %.2fs (tools %.3fs): runtime overhead %.2f ms per node\n", rep.Nodes, rep.SequentialSeconds, rep.ToolSeconds, rep.OverheadPerNodeMS)
	fmt.Fprintf(f.IO.Out, "DAG of %d no-op nodes, %d at a time: %.2fs: %.0f nodes/s\n", rep.Nodes, rep.MaxConcurrency, rep.ParallelSeconds, rep.ParallelNodesPerS)
}
