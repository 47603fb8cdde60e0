package bench

import (
	"fmt"
	"os"

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
	var rate, latencies, nodes, replicas int
	cmd := &cobra.Command{
		Use:   "route",
		Short: "The routed message path vs raw JetStream, throughput and latency",
		Long: `Appends unaddressed context requests; the Guide routes each to an agent that
answers at once, and the answer is appended: append -> Guide -> agent -> reply.

Durable throughput: the routed path against the bare two-hop chain, the same
two hops done in bare JetStream with no runtime at all: messages of Sylk's
shape (body, headers, subjects, consumer filters) published to hop 0, and two
durable consumers that each publish a copy to the next hop without waiting and
ack their message once the copy is stored. Three stored messages, two
deliveries and two acks a message, as on the routed path, each message stored
on its own (with --sync always, one fsync each). The two are measured in 3
paired rounds of --events each, back to back, the side that goes first
alternating; the ratio is the median of the rounds' (target >= 0.6 with
--sync always, for information with interval). Both sides carry their p50
and p99 latencies, sampled afterwards at --latency-rate: by default half the
slowest throughput the run measured, a rate every side sustains, so a
latency is not the length of a queue.

Then, on the same totals: the routed path against raw JetStream async publish
and the bare chain against it (both for information: raw publish stores one
message where the routed path stores three), and the p50 and p99 latencies of each against raw
publish-to-delivery (target for the routed path: at most 3x raw, a ratio >=
0.33). Each measure prints the CPU time the process spent per op, the
embedded server's included: when both cores are busy, that cost is what sets
the rate.

In each sync mode it also routes through agent credentials (the Guide's and the
answering agent's own, their permissions checked on every publish, fetch and
ack) on a server with authentication against the same on one without: 7 rounds
of --events, the two back to back in each (which goes first alternates),
compared by the median of the rounds' ratios, target >= 0.9; --json lists every
round.

Then a DAG of --nodes no-op tool nodes (as 'sylk bench dag'): the runtime's own
overhead per node and nodes per second.

With --replicas N (at least 2) it measures a cluster instead: N embedded
servers routed to each other on loopback, SYLK and SYLK_DLQ with N copies,
against one server, both running side by side. The routed path's throughput
on the cluster over one server's, in 5 paired rounds (the median of their
ratios), is the ratio (target >= 0.4), with the p50 and p99 latencies at
--latency-rate beside it. The client and the agents use the first member, and
the leaders of the stream and of the agents' consumers are moved to it before
the rounds, so every run measures the same placement (the cluster's measure
names them as the run ended).

Examples:
  sylk bench route                          # every comparison, both sync modes
  sylk bench route --sync always --json     # durable mode only, for scripts
  sylk bench route --replicas 3 --sync always --events 2000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if latencies < 1 {
				return cmdutil.UsageError{Err: fmt.Errorf("--latency-messages %d: want at least 1 message whose latency is sampled, e.g. 2000", latencies)}
			}
			if replicas < 1 {
				return cmdutil.UsageError{Err: fmt.Errorf("--replicas %d: want 1 (one server) or the size of the cluster to measure, e.g. 3", replicas)}
			}
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			cfg := agentbench.RouteConfig{DataDir: dir, Messages: opts.Events, SyncModes: syncModes, LatencyRate: rate, LatencyMessages: latencies}
			if replicas > 1 {
				cs, err := agentbench.RouteCluster(cmd.Context(), cfg, replicas, opts.progress(f.IO))
				if err != nil {
					return err
				}
				if opts.JSON {
					return f.IO.PrintJSON(newBenchReport("route", cs))
				}
				return printComparisons(f, opts, "route", cs)
			}
			cs, err := agentbench.Route(cmd.Context(), cfg, opts.progress(f.IO))
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
	cmd.Flags().IntVar(&rate, "latency-rate", 0, "messages per second while sampling latency (0: half the slowest throughput measured)")
	cmd.Flags().IntVar(&latencies, "latency-messages", 2000, "messages whose latency is sampled, on each side")
	cmd.Flags().IntVar(&nodes, "nodes", 1000, "nodes of the no-op DAG run afterwards (0: skip it)")
	cmd.Flags().IntVar(&replicas, "replicas", 1, "measure a cluster of this many servers, each stream with this many copies, against one server (1: no cluster)")
	return cmd
}

func newBenchDAGCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var concurrency, short int
	cmd := &cobra.Command{
		Use:   "dag",
		Short: "DAGs of no-op tool nodes: overhead per node and nodes per second",
		Long: `Runs DAGs of no-op tool nodes (list, in-process) through the Orchestrator and
the Engineer on an embedded server:

  - a chain (each node depends on the one before) of --short-chain nodes, then
    one of --events nodes, reporting the runtime's own overhead per node (wall
    time less the tools' time). The long chain's overhead per node against the
    short one's, same run, is the ratio (target >= 0.8: the cost of a step does
    not grow with the DAG), and against a budget of 1 ms per node;
  - --events independent nodes run --max-concurrency at a time, in nodes per
    second, against a budget of 4,000 nodes/s.

Examples:
  sylk bench dag                       # 100 vs 10,000 nodes, wide at 64
  sylk bench dag --events 2000 --json  # a quicker run, for scripts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			rep, err := agentbench.DAG(cmd.Context(), agentbench.DAGConfig{DataDir: dir, Nodes: opts.Events, ShortChain: short, MaxConcurrency: concurrency}, opts.progress(f.IO))
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(dagReport{newBenchReport("dag", rep.Comparisons), rep})
			}
			printDAGReport(f, rep)
			return printComparisons(f, opts, "dag", rep.Comparisons)
		},
	}
	opts.bind(cmd, 10_000)
	cmd.Flags().IntVar(&short, "short-chain", 100, "nodes of the short chain the long one is compared with")
	cmd.Flags().IntVar(&concurrency, "max-concurrency", 64, "the wide DAG's max_concurrency")
	return cmd
}

// dagReport is what `sylk bench dag --json` prints: the comparisons and the
// raw figures.
type dagReport struct {
	benchReport
	Report *agentbench.DAGReport `json:"report"`
}

func printDAGReport(f *cmdutil.Factory, rep *agentbench.DAGReport) {
	fmt.Fprintf(f.IO.Out, "chain of %d no-op nodes: runtime overhead %.2f ms per node\n", rep.ShortChain, rep.ShortOverheadMS)
	fmt.Fprintf(f.IO.Out, "chain of %d no-op nodes: %.2fs (tools %.3fs): runtime overhead %.2f ms per node\n", rep.Nodes, rep.SequentialSeconds, rep.ToolSeconds, rep.OverheadPerNodeMS)
	fmt.Fprintf(f.IO.Out, "DAG of %d no-op nodes, %d at a time: %.2fs: %.0f nodes/s\n", rep.Nodes, rep.MaxConcurrency, rep.ParallelSeconds, rep.ParallelNodesPerS)
}

func newBenchResumeCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var kills int
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Seconds from restarting a killed server to its interrupted work completing",
		Long: `Starts 'sylk serve' (this binary, default settings) on a fresh data directory,
runs a chain of one-second tool nodes, SIGKILLs the server while a node's tool
runs, starts it again at once and times how long the interrupted node takes to
complete, --kills times. The slowest is compared with a budget of 5 seconds
(ratio = 5 s / slowest; target >= 1).

Examples:
  sylk bench resume
  sylk bench resume --kills 5 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			rep, err := agentbench.Resume(cmd.Context(), agentbench.ResumeConfig{Bin: bin, DataDir: dir, Kills: kills}, opts.progress(f.IO))
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(resumeReport{newBenchReport("resume", rep.Comparisons), rep})
			}
			for i, s := range rep.Seconds {
				fmt.Fprintf(f.IO.Out, "kill %d: the interrupted node completed %.2fs after the restart\n", i+1, s)
			}
			return printComparisons(f, opts, "resume", rep.Comparisons)
		},
	}
	opts.bind(cmd, 0)
	cmd.Flags().MarkHidden("events") // the kills are the measure
	cmd.Flags().IntVar(&kills, "kills", 3, "how many times the server is killed")
	return cmd
}

// resumeReport is what `sylk bench resume --json` prints.
type resumeReport struct {
	benchReport
	Report *agentbench.ResumeReport `json:"report"`
}
