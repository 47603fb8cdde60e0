package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/agentbench"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/web"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
)

// TargetWebCPU: the web view with its viewers adds at most 10% to the CPU
// a routed message costs (a ratio, without over with, of at least 1/1.1).
const TargetWebCPU = 1 / 1.1

// viewersReport is whether every viewer kept up, over every run with
// viewers.
type viewersReport struct {
	Viewers int `json:"viewers"`
	// Appended is how many events the measured runs appended; MinReceived
	// the sum over the runs of the fewest any viewer received of them;
	// Dropped the viewers the server gave up on for not reading.
	Appended    uint64 `json:"appended"`
	MinReceived int    `json:"min_received"`
	Dropped     int    `json:"dropped"`
	KeptUp      bool   `json:"kept_up"`
	// ViewersCPU is the CPU the viewers' process took per routed message,
	// in microseconds, from opening its streams to closing them: not in
	// the measure, but taken from the same CPUs.
	ViewersCPU float64 `json:"viewers_cpu_us_per_msg"`
	// viewersCPU and messages are what ViewersCPU is of, summed over runs.
	viewersCPU time.Duration
	messages   int
}

// add counts a run's report in.
func (r *viewersReport) add(run viewersReport) {
	r.viewersCPU += run.viewersCPU
	r.messages += run.messages
	if r.messages > 0 {
		r.ViewersCPU = float64(r.viewersCPU) / float64(time.Microsecond) / float64(r.messages)
	}
	r.Appended += run.Appended
	r.MinReceived += run.MinReceived
	r.Dropped += run.Dropped
	r.KeptUp = r.KeptUp && run.KeptUp
}

type webReport struct {
	benchReport
	Live viewersReport `json:"live"`
}

func newBenchWebCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &BenchOptions{}
	var viewers, rounds int
	var syncMode string
	cmd := &cobra.Command{
		Use:   "web",
		Short: "The routed path with live web viewers attached vs without, CPU per message",
		Long: `Runs the routed path of 'sylk bench route' (append -> Guide -> agent -> reply)
on one embedded server with the projector folding the stream into a
projections store, as 'sylk serve' runs them, after a warm-up, and compares
its CPU per routed message: with the web view fed by the projector and
--viewers clients reading its live stream (server-sent events, /api/events),
each a connection of its own as a browser's EventSource would, against no
web view; then with the web view and no viewer against no web view.

What is measured: the CPU time (user and system, getrusage) of this process
alone, which holds the embedded NATS server, the Guide and the answering
agent, the projector, the web view with its HTTP server, and the client that
appends the messages and waits for their answers; from the first append of
a run to its end, over the run's messages. A run ends once every answer has
come and the projector has read the stream's last event; with viewers, once
every viewer has also received every one of those events, so that encoding
and sending every event to every viewer is inside the measure. The viewers
are one process of their own (started once, reading every connection on one
CPU and keeping only the events' ids), whose CPU is not measured: it shares
the machine's CPUs with this one, as a browser on the same machine would
(what it took per routed message is printed for information).

A viewer is what a page costs: a page opens one such stream, unfiltered, for
its state and its event log together (a filtered log, or a session's
timeline, opens one more, of its own events only). A viewer asks for the
events from now on; a page first reads the last ten minutes' (its log's
since), once, when it opens, and the viewers attach before each measured
run. Each comparison is --rounds rounds, decided by the median of the
rounds' ratios: on a shared machine one run measured once swings by more
than the 10% measured, and the median of many rounds moves far less than
one. A round runs each side twice, back to back and mirrored (with, without,
without, with; the next round the other way round), each side's two runs
taken together: the CPU per message grows run by run as the stream does,
and in a round of one run each that growth favoured the side that went
first.

The target ratio is the CPU per routed message without the web view over the
one with it and its viewers (target >= 0.91: at most 10% more). Printed for
information: the web view with no viewer (only the usage figures it keeps)
against no web view (two sides doing the same work but for that: how far the
measure itself spreads), the viewers against the web view with none (every
round's total), and the throughput. The live stream keeps up when every
viewer received every event each run appended and the server dropped none;
the command fails otherwise.

Examples:
  sylk bench web                 # 10 viewers, 5,000 messages a run, 8 rounds of 4 runs
  sylk bench web --viewers 20 --rounds 3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if viewers < 1 {
				return cmdutil.Usagef("--viewers %d: want at least 1", viewers)
			}
			if rounds < 1 {
				return cmdutil.Usagef("--rounds %d: want at least 1", rounds)
			}
			dir, cleanup, err := opts.scratch()
			if err != nil {
				return err
			}
			defer cleanup()
			rep, err := benchWeb(cmd.Context(), dir, opts.Events, viewers, rounds, syncMode, opts.progress(f.IO))
			if err != nil {
				return err
			}
			if opts.JSON {
				err = f.IO.PrintJSON(rep)
			} else {
				err = printComparisons(f, opts, "web", rep.Comparisons)
				fmt.Fprintf(f.IO.Out, "live stream: %d viewers, %d events appended, the slowest received %d, %d dropped: kept up %v; the viewers' process (not measured) took %.1f µs CPU/msg\n",
					rep.Live.Viewers, rep.Live.Appended, rep.Live.MinReceived, rep.Live.Dropped, rep.Live.KeptUp, rep.Live.ViewersCPU)
			}
			if err == nil && !rep.Live.KeptUp {
				err = errors.New("bench web: the live stream did not keep up")
			}
			return err
		},
	}
	opts.bind(cmd, 5000)
	cmd.Flags().IntVar(&viewers, "viewers", 10, "live viewers (SSE clients) attached in the runs with viewers")
	cmd.Flags().IntVar(&rounds, "rounds", 8, "rounds of each comparison, each side run twice in each (the median of their ratios decides)")
	cmd.Flags().StringVar(&syncMode, "sync", broker.SyncInterval, "sync mode of the embedded server")
	return cmd
}

func benchWeb(ctx context.Context, dir string, n, viewers, rounds int, mode string, progress func(string)) (webReport, error) {
	b, err := broker.Start(ctx, broker.Options{DataDir: filepath.Join(dir, "web"), Listen: broker.ListenNone, Sync: mode, Name: "bench"})
	if err != nil {
		return webReport{}, err
	}
	defer b.Close()
	// The projector `sylk serve` runs, folding every run; the web view
	// reads the stream through it.
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		return webReport{}, err
	}
	defer store.Close()
	pctx, stopProjector := context.WithCancel(ctx)
	projector := make(chan error, 1)
	go func() { projector <- store.Projector(events.New(b.JetStream())).Run(pctx) }()
	defer func() { stopProjector(); <-projector }()
	cfg := agentbench.RouteConfig{Settle: store.WaitFor}
	progress(fmt.Sprintf("warm-up: %d routed messages", n/2))
	if _, err := agentbench.RoutedPath(ctx, cfg, b, n/2); err != nil {
		return webReport{}, err
	}
	bare := func() (eventbench.Measure, error) {
		progress(fmt.Sprintf("without the web view: %d routed messages", n))
		return agentbench.RoutedPath(ctx, cfg, b, n)
	}
	// One process reads every run's viewers, started once: a process
	// started for each run would put its start in every run's neighbourhood.
	vp, err := startViewers(ctx, web.Token(benchSecret), viewers)
	if err != nil {
		return webReport{}, err
	}
	defer vp.stop()
	live := viewersReport{Viewers: viewers, KeptUp: true}
	watched := func() (eventbench.Measure, error) {
		m, l, err := routedWatched(ctx, b, store, cfg, n, vp, progress)
		live.add(l)
		return m, err
	}
	// The web view with no viewer: what it costs with no page open (the
	// usage figures), the floor under what the viewers add.
	idle := func() (eventbench.Measure, error) {
		m, _, err := routedWatched(ctx, b, store, cfg, n, nil, progress)
		return m, err
	}
	withViewers := fmt.Sprintf("web view with %d viewers", viewers)
	cpuWatched, wallWatched, err := pairedCPU("CPU per routed message, "+withViewers+" vs no web view", rounds, TargetWebCPU, watched, bare)
	if err != nil {
		return webReport{}, err
	}
	cpuIdle, wallIdle, err := pairedCPU("CPU per routed message, web view with no viewer vs no web view", rounds, 0, idle, bare)
	if err != nil {
		return webReport{}, err
	}
	wallWatched.Name = fmt.Sprintf("routed path with %d viewers vs no web view", viewers)
	cs := []eventbench.Comparison{cpuWatched, cpuIdle,
		cpuComparison("CPU per routed message, "+withViewers+" vs with none (all rounds)", wallWatched.Sylk, wallIdle.Sylk, 0),
		wallWatched}
	return webReport{newBenchReport("web", cs), live}, nil
}

// pairedCPU compares the CPU per routed message of two sides in rounds, as
// eventbench.Paired does, but each round runs each side twice, mirrored
// (eventbench.Round.RunMirrored): the routed path's CPU per message grows
// run by run as the stream does, which in a round of one run each favours
// the side that goes first. The median of the rounds' ratios decides: the
// load of a shared machine comes and goes between runs a few seconds apart,
// and one side measured once swings by more than the 10% measured. cpu is
// that comparison, base's CPU per message over sylk's; wall the same
// rounds' throughput, with each side's totals.
func pairedCPU(name string, rounds int, target float64, sylk, base func() (eventbench.Measure, error)) (cpu, wall eventbench.Comparison, err error) {
	rs := make([]eventbench.Round, rounds)
	for i := range rs {
		if err := rs[i].RunMirrored(i, sylk, base); err != nil {
			return cpu, wall, err
		}
	}
	wall = eventbench.PairedRounds(name, 0, slices.Clone(rs))
	for i := range rs {
		rs[i].Sylk, rs[i].Baseline = perCPU(rs[i].Sylk), perCPU(rs[i].Baseline)
	}
	cpu = eventbench.PairedRounds(name, target, rs)
	cpu.Sylk, cpu.Baseline = perCPU(wall.Sylk), perCPU(wall.Baseline)
	return cpu, wall, nil
}

// benchSecret is the secret of the benchmark's web view's token.
var benchSecret = []byte("bench-web")

// routedWatched measures the routed path on b with the web view fed by
// store's projector and viewers of vp (nil for none) reading its live
// stream, and whether every viewer got every event the run appended. The
// run ends once the viewers have every event the projector has read by the
// last answer: the sending of the run's events to every viewer is inside
// the measure.
func routedWatched(ctx context.Context, b *broker.Broker, store *projections.Store, cfg agentbench.RouteConfig, n int, vp *viewersProcess, progress func(string)) (eventbench.Measure, viewersReport, error) {
	var none eventbench.Measure
	var live viewersReport
	viewers := 0
	if vp != nil {
		viewers = vp.viewers
	}
	log := events.New(b.JetStream())
	w, err := web.Start(ctx, web.Options{Conn: b.Conn(), Log: log, Store: store, JS: b.JetStream(), Secret: benchSecret, Now: time.Now})
	if err != nil {
		return none, live, err
	}
	defer w.Close()
	mux := http.NewServeMux()
	w.Register(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return none, live, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	progress(fmt.Sprintf("with the web view and %d viewers: %d routed messages", viewers, n))
	var viewersCPU time.Duration
	if vp != nil {
		if viewersCPU, err = vp.open("http://" + ln.Addr().String() + "/api/events"); err != nil {
			return none, live, err
		}
		defer func() {
			if vp != nil { // an error came before the close
				vp.close()
			}
		}()
	}
	if err := waitFor(ctx, 30*time.Second, func() bool { return w.Watching() == viewers }); err != nil {
		return none, live, fmt.Errorf("bench web: %d of %d viewers attached: %w", w.Watching(), viewers, err)
	}
	first, err := log.LastSeq(ctx)
	if err != nil {
		return none, live, err
	}
	if vp != nil {
		settle := cfg.Settle
		cfg.Settle = func(ctx context.Context, last uint64) error {
			if err := settle(ctx, last); err != nil {
				return err
			}
			_, err := vp.received(first, last)
			return err
		}
	}
	watched, err := agentbench.RoutedPath(ctx, cfg, b, n)
	if err != nil {
		return none, live, err
	}
	last, err := log.LastSeq(ctx)
	if err != nil {
		return none, live, err
	}
	live = viewersReport{Viewers: viewers, Appended: last - first}
	if vp == nil {
		return watched, live, nil
	}
	// Each viewer has until viewersWait after the run to have every event.
	if live.MinReceived, err = vp.received(first, last); err != nil {
		return none, live, err
	}
	closedCPU, err := vp.close()
	vp = nil // closed: nothing left for the deferred close
	if err != nil {
		return none, live, err
	}
	live.messages, live.viewersCPU = n, closedCPU-viewersCPU
	live.Dropped = w.Drops()
	live.KeptUp = live.MinReceived == int(live.Appended) && live.Dropped == 0

	return watched, live, nil
}

// cpuComparison compares the CPU per message of two measures: base's over
// m's, so that a ratio below 1 is what m adds.
func cpuComparison(name string, m, base eventbench.Measure, target float64) eventbench.Comparison {
	c := eventbench.Comparison{Name: name, Sylk: perCPU(m), Baseline: perCPU(base), Target: target}
	if m.CPUPerOp > 0 {
		c.Ratio = base.CPUPerOp / m.CPUPerOp
	}
	c.Pass = c.Ratio >= c.Target
	return c
}

// perCPU restates a measure's rate as messages per CPU-second, so that the
// comparison's ratio is one of CPU costs.
func perCPU(m eventbench.Measure) eventbench.Measure {
	if m.CPUPerOp > 0 {
		m.PerSec = 1e6 / m.CPUPerOp
	}
	m.Name += " (per CPU-second)"
	return m
}

func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
