package bench

import (
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/agentbench"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events/eventbench"
)

func newBenchForkCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var short, forks int
	cmd := &cobra.Command{
		Use:   "fork",
		Short: "Forking at the end of a long session vs a short one (flat: target >= 0.5)",
		Long: `Appends a session of --short events and one of --events, then forks each at its
end --forks times on an embedded server with the projector running, timing
each fork from appending its session_fork to reading the fork's state. A fork
shares its parent's history instead of copying it, so the ratio (forks per
second at the long parent over the short one) should stay near 1: the target
is at least 0.5.`,
		Example: `  sylk bench fork
  sylk bench fork --events 1000000 --json | jq '.comparisons[0].ratio'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runComparisons(f, opts, "fork", func(dir string) ([]eventbench.Comparison, error) {
				return agentbench.Fork(cmd.Context(), agentbench.ForkConfig{DataDir: dir, Short: short, Long: opts.Events, Forks: forks}, opts.progress(f.IO))
			})
		},
	}
	opts.bind(cmd, 100_000)
	cmd.Flags().IntVar(&short, "short", 100, "events of the short session")
	cmd.Flags().IntVar(&forks, "forks", 200, "forks of each session")
	return cmd
}

func newBenchReexecuteCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var concurrency int
	cmd := &cobra.Command{
		Use:   "reexecute",
		Short: "Re-executing a recorded DAG session vs running it live (target >= 1x)",
		Long: `Runs a DAG of --events no-op tool nodes live, as 'sylk bench dag' does, then
re-executes the recorded session against the agents in a fresh runtime of its
own, every tool call answered from the recording: the session's events per
second each way, in the same run. Target: no slower than the live run.

What is timed, on each side:
  live run      from appending the session's inputs (session_create,
                session_resume, dag_execute) to reading its
                workflow_complete; its server, projections and agents were
                started and their consumers in place before.
  re-execution  from feeding the first recorded input to the verdict: every
                output of the agents produced again and compared with the
                recorded one, and the agents quiet (nothing extra); its
                scratch server, projections and agents were started and their
                consumers in place before.
Each side's start-up is reported on its own (startup_seconds in --json). A
second comparison, for information, times the re-execution with its start-up.
`,
		Example: `  sylk bench reexecute
  sylk bench reexecute --events 200 --json | jq '.comparisons[0].ratio'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runComparisons(f, opts, "reexecute", func(dir string) ([]eventbench.Comparison, error) {
				return agentbench.Reexecute(cmd.Context(), agentbench.ReexecuteConfig{DataDir: dir, Nodes: opts.Events, MaxConcurrency: concurrency}, opts.progress(f.IO))
			})
		},
	}
	opts.bind(cmd, 1000)
	cmd.Flags().IntVar(&concurrency, "max-concurrency", 16, "the DAG's max_concurrency")
	return cmd
}

// runComparisons runs a benchmark in its scratch directory and prints its
// comparisons.
func runComparisons(f *cmdutil.Factory, opts *BenchOptions, name string, run func(dir string) ([]eventbench.Comparison, error)) error {
	dir, cleanup, err := opts.scratch()
	if err != nil {
		return err
	}
	defer cleanup()
	cs, err := run(dir)
	if err != nil {
		return err
	}
	return printComparisons(f, opts, name, cs)
}
