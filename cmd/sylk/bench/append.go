package bench

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events/eventbench"
)

// BenchOptions are the flags shared by the `sylk bench` commands.
type BenchOptions struct {
	Events     int
	JSON       bool
	Dir        string
	CPUProfile string
}

func (o *BenchOptions) bind(cmd *cobra.Command, defaultEvents int) {
	cmd.Flags().IntVar(&o.Events, "events", defaultEvents, "events per measured run")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the comparisons as JSON (one object with a list of comparisons)")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "scratch directory (default: a temporary one, removed afterwards)")
	cmd.Flags().StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (read it with 'go tool pprof')")
}

// scratch returns the benchmark's scratch directory and its cleanup, and
// starts the CPU profile if one was asked for (the cleanup stops it).
func (o *BenchOptions) scratch() (string, func(), error) {
	stop := func() {}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return "", nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return "", nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		stop = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	if o.Dir != "" {
		return o.Dir, stop, os.MkdirAll(o.Dir, 0o755)
	}
	dir, err := os.MkdirTemp("", "sylk-bench-")
	return dir, func() { os.RemoveAll(dir); stop() }, err
}

func newBenchAppendCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var batch int
	var syncModes []string
	cmd := &cobra.Command{
		Use:   "append",
		Short: "Batched Append vs raw JetStream async publish, in both sync modes",
		Long: `Appends ~1 KB envelopes with AppendBatch (validation, encoding, headers, atomic
batch) and publishes the same bytes with raw JetStream PublishAsync to a stream of
the same configuration, on the same embedded server, in each sync mode. In
"always" mode it also compares batched durable append with per-message durable
publish (one fsync per message). Targets: ratio >= 0.6 and >= 8.

In each sync mode it also appends through an agent's credential on a server
with authentication against the same on one without: 7 rounds of half --events,
the two back to back in each (which goes first alternates), compared by the
median of the rounds' ratios, target >= 0.9; --json lists every round.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			cfg := eventbench.AppendConfig{DataDir: dir, Events: opts.Events, Batch: batch, SyncModes: syncModes}
			cs, err := eventbench.Append(cmd.Context(), cfg, opts.progress(f.IO))
			if err != nil {
				return err
			}
			return printComparisons(f, opts, "append", cs)
		},
	}
	opts.bind(cmd, 20000)
	cmd.Flags().IntVar(&batch, "batch", 500, "events per AppendBatch")
	cmd.Flags().StringSliceVar(&syncModes, "sync", []string{broker.SyncAlways, broker.SyncInterval}, "sync modes to measure")
	return cmd
}

// progress reports a step on stderr, unless --json goes to a file.
func (o *BenchOptions) progress(io *cmdutil.IOStreams) func(string) {
	return func(s string) {
		if !o.JSON || io.Terminal {
			fmt.Fprintln(io.ErrOut, "…", s)
		}
	}
}

func newBenchReport(name string, cs []eventbench.Comparison) benchReport {
	pass := true
	for _, c := range cs {
		pass = pass && c.Pass
	}
	return benchReport{Benchmark: name, Comparisons: cs, Pass: pass}
}

// benchReport is what `sylk bench X --json` prints.
type benchReport struct {
	Benchmark   string                  `json:"benchmark"`
	Comparisons []eventbench.Comparison `json:"comparisons"`
	Pass        bool                    `json:"pass"`
}

// measureDetails is a measure's CPU per op, its start-up time and its latencies,
// where it has them.
func measureDetails(m eventbench.Measure) string {
	var s string
	if m.CPUPerOp != 0 {
		s = fmt.Sprintf(", %.1f µs CPU/op", m.CPUPerOp)
	}
	if m.StartupSeconds != 0 {
		s += fmt.Sprintf(" (after %.3fs of start-up, not timed)", m.StartupSeconds)
	}
	if m.P50MS != 0 {
		s += fmt.Sprintf("; latency p50 %.1f ms, p99 %.1f ms", m.P50MS, m.P99MS)
	}
	return s
}

func printComparisons(f *cmdutil.Factory, opts *BenchOptions, name string, cs []eventbench.Comparison) error {
	if opts.JSON {
		return f.IO.PrintJSON(newBenchReport(name, cs))
	}
	for _, c := range cs {
		fmt.Fprintln(f.IO.Out, c)
		fmt.Fprintf(f.IO.Out, "    sylk:     %-40s %8d ops in %.3fs, %.1f allocs/op%s\n", c.Sylk.Name, c.Sylk.Ops, c.Sylk.Seconds, c.Sylk.AllocsPerOp, measureDetails(c.Sylk))
		fmt.Fprintf(f.IO.Out, "    baseline: %-40s %8d ops in %.3fs%s\n", c.Baseline.Name, c.Baseline.Ops, c.Baseline.Seconds, measureDetails(c.Baseline))
	}
	return nil
}
