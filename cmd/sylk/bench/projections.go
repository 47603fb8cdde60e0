package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections/projbench"
)

// rebuildReport is what `sylk bench rebuild --json` prints: the shape of
// every bench report, plus the start-up details.
type rebuildReport struct {
	benchReport
	Startup *projbench.StartupReport `json:"startup"`
	Rebuild *processReport           `json:"rebuild_process"`
}

func newBenchRebuildCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var rounds int
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Projection rebuild vs raw stream read and raw Pebble writes; start-up after a clean stop",
		Long: `Generates a stream of --events events (10,000s of interleaved 50-event sessions:
plans, DAGs, tool calls, checkpoints; reused from --dir when it exists), then
measures in the same run: a bare ordered-consumer read of the stream, a full
rebuild of every projection, and bare Pebble batched writes of the keys the
rebuild produced. Targets: rebuild >= 0.6x the raw read, and >= 0.5x the
slower of the two raw parts. --rounds rounds (default 5) alternate the read
and the rebuild; each keeps its best.
Each round also rebuilds every projection but the audit one into a second
store, right beside the full rebuild: each side twice, mirrored (with, without,
without, with; the next round the other way round), since in rounds of one run
each the side that went first came out slower. The audit projection's cost is
the median of the rounds' ratios, target >= 0.9 (with vs without audit);
--json lists every round's figures.

Then it stops the store cleanly and starts again: the start-up must fold nothing
and be ready within a second. It is measured in this process and in a fresh
'sylk projections status' process, whose peak RSS is reported.

Last, a fresh 'sylk projections rebuild' process drops and rebuilds the store:
its peak RSS and CPU time per event are reported (rebuild_process in --json).
--events 5000000 measures a larger stream (generation takes minutes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if rounds < 1 {
				return fmt.Errorf("--rounds %d: at least 1 round is needed", rounds)
			}
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			ctx := cmd.Context()
			res, err := projbench.Rebuild(ctx, projbench.Config{Dir: dir, Events: opts.Events, Rounds: rounds, Progress: opts.progress(f.IO)})
			if err != nil {
				return err
			}
			if err := startupProcess(ctx, res); err != nil {
				return err
			}
			cs := res.Comparisons
			cs[len(cs)-1] = projbench.StartupComparison(res.Startup)
			opts.progress(f.IO)("a fresh 'sylk projections rebuild' process: peak RSS and CPU per event")
			rp, err := rebuildProcess(ctx, res, res.Startup.Events)
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(rebuildReport{newBenchReport("rebuild", cs), res.Startup, rp})
			}
			if err := printComparisons(f, opts, "rebuild", cs); err != nil {
				return err
			}
			s := res.Startup
			fmt.Fprintf(f.IO.Out, "start-up with %d events projected: %.3fs in process, %d events folded; a fresh 'sylk projections status': %.3fs in all (embedded broker start included), peak RSS %.1f MiB\n",
				s.Events, s.Seconds, s.Replayed, s.ProcessSeconds, float64(s.ProcessRSSBytes)/(1<<20))
			fmt.Fprintf(f.IO.Out, "a fresh 'sylk projections rebuild' of %d events: %.1fs in all (embedded broker start included), %.1f µs CPU per event, peak RSS %.1f MiB\n",
				rp.Events, rp.Seconds, rp.CPUPerEvent, float64(rp.PeakRSSBytes)/(1<<20))
			return nil
		},
	}
	opts.bind(cmd, 1_000_000)
	cmd.Flags().IntVar(&rounds, "rounds", 5, "rounds of the raw read and the two rebuilds (each side keeps its best; with vs without audit takes the median)")
	return cmd
}

// startupProcess runs `sylk projections status --json` on the rebuilt store
// in a fresh process and records its start-up time and peak RSS.
func startupProcess(ctx context.Context, res *projbench.RebuildResult) error {
	run, out, err := runChild(ctx, "--data", res.Data, "projections", "status", "--json")
	if err != nil {
		return fmt.Errorf("start-up process: %w", err)
	}
	res.Startup.ProcessSeconds = run.Seconds
	res.Startup.ProcessRSSBytes = run.PeakRSSBytes
	var st struct {
		StartupSeconds float64 `json:"startup_seconds"`
		Applied        uint64  `json:"applied"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return fmt.Errorf("start-up process printed %q: %w", out, err)
	}
	if int(st.Applied) != res.Startup.Events {
		return fmt.Errorf("start-up process applied %d events, want %d", st.Applied, res.Startup.Events)
	}
	return nil
}

// processReport is how a fresh `sylk projections rebuild` process went:
// its whole run (embedded broker start included), its CPU time per event
// and its peak resident set.
type processReport struct {
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	CPUPerEvent  float64 `json:"cpu_us_per_event"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// rebuildProcess drops and rebuilds the store of res's stream in a fresh
// `sylk projections rebuild` process.
func rebuildProcess(ctx context.Context, res *projbench.RebuildResult, events int) (*processReport, error) {
	run, out, err := runChild(ctx, "--data", res.Data, "projections", "rebuild", "--json")
	if err != nil {
		return nil, fmt.Errorf("rebuild process: %w", err)
	}
	var r struct {
		Events uint64 `json:"events"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("rebuild process printed %q: %w", out, err)
	}
	if int(r.Events) != events {
		return nil, fmt.Errorf("rebuild process folded %d events, want %d", r.Events, events)
	}
	return &processReport{Events: events, Seconds: run.Seconds, PeakRSSBytes: run.PeakRSSBytes,
		CPUPerEvent: run.CPUSeconds * 1e6 / float64(events)}, nil
}

// childRun is how a child sylk process went.
type childRun struct {
	Seconds, CPUSeconds float64
	PeakRSSBytes        int64
}

// runChild runs this executable with args and returns its standard output.
func runChild(ctx context.Context, args ...string) (childRun, []byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return childRun{}, nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return childRun{}, nil, err
	}
	// The child's peak RSS, sampled from /proc while it runs: getrusage's
	// maxrss would count this (large) process's pages the child shared
	// between fork and exec.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
wait:
	for {
		if v := vmHWM(cmd.Process.Pid); v > peak {
			peak = v
		}
		select {
		case err = <-done:
			break wait
		case <-tick.C:
		}
	}
	if err != nil {
		return childRun{}, nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	st := cmd.ProcessState
	return childRun{Seconds: time.Since(start).Seconds(), CPUSeconds: (st.UserTime() + st.SystemTime()).Seconds(), PeakRSSBytes: peak}, out.Bytes(), nil
}

func newBenchReplayCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var sizes []int
	var samples int
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Replay of one session from its log vs a subject-filtered consumer, as the stream grows",
		Long: `Reads one 50-event session out of a stream of interleaved sessions (--sizes,
each generated or reused from --dir) from the session log projection, and the
same session with a subject-filtered ordered consumer on the same stream, over
--samples different sessions. Targets: the log >= 50x faster, and roughly
constant as the stream grows (the largest size >= 0.5x the smallest).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			if cmd.Flags().Changed("events") {
				sizes = []int{opts.Events}
			}
			cs, err := projbench.Replay(cmd.Context(), projbench.Config{Dir: dir, Sizes: sizes, Samples: samples, Progress: opts.progress(f.IO)})
			if err != nil {
				return err
			}
			return printComparisons(f, opts, "replay", cs)
		},
	}
	opts.bind(cmd, 500_000)
	cmd.Flags().IntSliceVar(&sizes, "sizes", []int{100_000, 500_000, 1_000_000}, "stream sizes to measure at (--events measures one size)")
	cmd.Flags().IntVar(&samples, "samples", 20, "different sessions read per measure")
	return cmd
}

// vmHWM is a process's peak resident set in bytes, from /proc (0 if gone).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
