package agentbench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// ForkConfig sizes the fork benchmark.
type ForkConfig struct {
	DataDir string
	// Short and Long are the two parents' lengths in events (default 100
	// and 100,000).
	Short, Long int
	// Forks of each parent, timed (default 200).
	Forks int
}

// ForkTarget: forking at the end of the long session is at least half as
// fast as at the end of the short one (the cost does not grow with the
// parent's length).
const ForkTarget = 0.5

// Fork times forking at the end of a short and a long session, on an
// embedded server with the projector running: from appending the
// session_fork to the fork's state being readable. One comparison: the long
// parent's forks per second over the short one's.
func Fork(ctx context.Context, cfg ForkConfig, progress func(string)) ([]eventbench.Comparison, error) {
	if cfg.Short == 0 {
		cfg.Short = 100
	}
	if cfg.Long == 0 {
		cfg.Long = 100_000
	}
	if cfg.Forks == 0 {
		cfg.Forks = 200
	}
	report := func(s string) { say(progress, s) }
	srv, err := startServer(ctx, filepath.Join(cfg.DataDir, "fork"), filepath.Join(cfg.DataDir, "work"), nil)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	log, store := srv.log, srv.store

	// Both parents exist before any fork is timed, and the forks of the two
	// alternate: each is timed against the same store.
	for _, p := range []struct {
		id string
		n  int
	}{{"short", cfg.Short}, {"long", cfg.Long}} {
		report(fmt.Sprintf("a session of %d events", p.n))
		if err := session(ctx, log, store, p.id, p.n); err != nil {
			return nil, err
		}
	}
	last, err := log.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	report(fmt.Sprintf("%d forks at the end of each", cfg.Forks))
	var took, cpu [2]time.Duration
	for i := range cfg.Forks {
		for j, parent := range []string{"short", "long"} {
			id := fmt.Sprintf("%s-f%d", parent, i)
			env, err := schemas.New(schemas.TypeSessionFork, id, "user", "", time.Now(), schemas.SessionFork{Parent: parent, ParentSeq: last})
			if err != nil {
				return nil, err
			}
			start, cpu0 := time.Now(), eventbench.ProcessCPU()
			seq, err := log.Append(ctx, env)
			if err != nil {
				return nil, err
			}
			if err := store.WaitFor(ctx, seq); err != nil {
				return nil, err
			}
			if _, err := store.Session(ctx, id); err != nil {
				return nil, fmt.Errorf("fork %s: %w", id, err)
			}
			took[j] += time.Since(start)
			cpu[j] += eventbench.ProcessCPU() - cpu0
		}
	}
	m := func(n int, d, cpu time.Duration) eventbench.Measure {
		return eventbench.Measure{Name: fmt.Sprintf("fork at the end of %d events", n), Ops: cfg.Forks, Seconds: d.Seconds(), PerSec: float64(cfg.Forks) / d.Seconds(),
			CPUPerOp: perOp(cpu, cfg.Forks)}
	}
	return []eventbench.Comparison{eventbench.Compare(fmt.Sprintf("fork: %d-event parent vs %d-event parent", cfg.Long, cfg.Short), m(cfg.Long, took[1], cpu[1]), m(cfg.Short, took[0], cpu[0]), ForkTarget)}, nil
}

// session appends a session of n events (created, resumed, then user
// input) in batches and waits until the projections have folded them.
func session(ctx context.Context, log *events.Log, store *projections.Store, id string, n int) error {
	create, _ := schemas.New(schemas.TypeSessionCreate, id, "user", "", time.Now(), schemas.SessionCreate{Name: id})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	batch := []*schemas.Envelope{create, resume}
	var last uint64
	for i := 2; i < n; i++ {
		// Addressed to nobody that runs here: the projections fold it, no
		// agent handles it.
		env, err := schemas.New(schemas.TypeUserInput, id, "user", "user", time.Now(), schemas.UserInput{Text: fmt.Sprintf("message %d", i)})
		if err != nil {
			return err
		}
		batch = append(batch, env)
		if len(batch) == 1000 || i == n-1 {
			seqs, err := log.AppendBatch(ctx, batch)
			if err != nil {
				return err
			}
			last, batch = seqs[len(seqs)-1], batch[:0]
		}
	}
	if len(batch) > 0 {
		seqs, err := log.AppendBatch(ctx, batch)
		if err != nil {
			return err
		}
		last = seqs[len(seqs)-1]
	}
	return store.WaitFor(ctx, last)
}

// ReexecuteConfig sizes the re-execution benchmark.
type ReexecuteConfig struct {
	DataDir string
	// Nodes of the no-op DAG (default 1000).
	Nodes int
	// MaxConcurrency of the DAG (default 16, as 'sylk bench dag').
	MaxConcurrency int
}

// ReexecuteTarget: re-executing a recorded run is no slower than running it
// live.
const ReexecuteTarget = 1.0

// Reexecute runs a DAG of no-op tool nodes live, as 'sylk bench dag' does,
// then re-executes the recorded session in a fresh runtime with every call
// answered from the recording: the session's events per second each way.
//
// Both sides are timed from a runtime whose agents are up to the run's end,
// so neither window holds a start-up, and each side's start-up is reported
// as its measure's StartupSeconds. The live run: from appending the
// session's three inputs to reading its workflow_complete (its server,
// projections and agents started before). The re-execution: from feeding
// its first input to the verdict, every output produced again and compared
// with the recorded one and the agents quiet (its scratch server,
// projections and agents started before). A second comparison, for
// information, puts the re-execution's start-up back in its window.
func Reexecute(ctx context.Context, cfg ReexecuteConfig, progress func(string)) ([]eventbench.Comparison, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 1000
	}
	if cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = 16
	}
	report := func(s string) { say(progress, s) }
	agentsCfg := runtime.Config{Concurrency: cfg.MaxConcurrency}
	begin := time.Now()
	srv, err := startServer(ctx, filepath.Join(cfg.DataDir, "reexec"), filepath.Join(cfg.DataDir, "work"), &agentsCfg)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	if err := srv.agentsUp(ctx); err != nil {
		return nil, err
	}
	liveStart := time.Since(begin)
	log, store, work := srv.log, srv.store, srv.work
	agentsCfg.DefaultWorkDir = work

	report(fmt.Sprintf("%d no-op nodes live, %d at a time", cfg.Nodes, cfg.MaxConcurrency))
	cpu0 := eventbench.ProcessCPU()
	wall, err := runDAG(ctx, log, "live", cfg.Nodes, cfg.MaxConcurrency, false, work)
	if err != nil {
		return nil, err
	}
	liveCPU := eventbench.ProcessCPU() - cpu0
	srv.stopAgents()
	if _, err := store.Projector(log).CatchUp(ctx); err != nil {
		return nil, err
	}
	rec, err := reexec.Load(ctx, store, "live", 0)
	if err != nil {
		return nil, err
	}
	if rec.Handled, err = reexec.HandledBy(ctx, srv.b.JetStream()); err != nil {
		return nil, err
	}
	n := len(rec.Events)
	report(fmt.Sprintf("re-executing the recorded session (%d events)", n))
	begin, cpuStart := time.Now(), eventbench.ProcessCPU()
	rt, err := reexec.Start(ctx, rec, reexec.Options{Runtime: agentsCfg, Dir: filepath.Join(cfg.DataDir, "reexec-run")})
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	reStart := time.Since(begin)
	cpu0, begin = eventbench.ProcessCPU(), time.Now()
	rep, err := rt.Execute(ctx)
	if err != nil {
		return nil, err
	}
	reWall, reCPU := time.Since(begin), eventbench.ProcessCPU()-cpu0
	if !rep.Identical {
		return nil, fmt.Errorf("the re-execution diverged: %s", rep.Divergence.Reason)
	}
	liveM := eventbench.Measure{Name: "live run", Ops: n, Seconds: wall.Seconds(), PerSec: float64(n) / wall.Seconds(), CPUPerOp: perOp(liveCPU, n),
		StartupSeconds: liveStart.Seconds()}
	reM := eventbench.Measure{Name: fmt.Sprintf("re-execution (%d calls served, %d made)", rep.CallsServed, rep.CallsMade), Ops: n, Seconds: reWall.Seconds(),
		PerSec: float64(n) / reWall.Seconds(), CPUPerOp: perOp(reCPU, n), StartupSeconds: reStart.Seconds()}
	withStart := reM
	withStart.Name += ", its start-up timed"
	withStart.Seconds += reStart.Seconds()
	withStart.PerSec, withStart.StartupSeconds = float64(n)/withStart.Seconds, 0
	withStart.CPUPerOp = perOp(eventbench.ProcessCPU()-cpuStart, n)
	return []eventbench.Comparison{
		eventbench.Compare(fmt.Sprintf("re-execute a %d-node DAG session vs its live run", cfg.Nodes), reM, liveM, ReexecuteTarget),
		eventbench.Compare("the same, the re-execution's start-up timed", withStart, liveM, 0),
	}, nil
}

// perOp is cpu in microseconds per op, as eventbench.Measure.CPUPerOp.
func perOp(cpu time.Duration, ops int) float64 {
	return float64(cpu) / float64(time.Microsecond) / float64(ops)
}
