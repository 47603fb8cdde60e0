package agentbench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/schemas"
)

// DAGConfig sizes the DAG benchmark.
type DAGConfig struct {
	DataDir string
	// Nodes in the long chain and in the wide DAG (default 10,000).
	Nodes int
	// ShortChain is the chain the long one's overhead per node is compared
	// with (default 100).
	ShortChain int
	// MaxConcurrency of the wide DAG (default 64).
	MaxConcurrency int
}

// Targets of the DAG benchmark.
const (
	// TargetChainFlat: the overhead per node of the long chain over the short
	// one's, as speeds (short's overhead / long's). 1 is perfectly flat.
	TargetChainFlat = 0.8
	// ChainBudgetMS is the most overhead per node of a chain.
	ChainBudgetMS = 1.0
	// WideBudgetPerSec is the least nodes per second of the wide DAG.
	WideBudgetPerSec = 4000
)

// DAGReport is what the DAG benchmark measures on DAGs of no-op tool nodes: a
// chain (each node depends on the one before) at two lengths, reporting the
// runtime's own overhead per node (wall time less the tools' own time, per
// node), and a wide DAG of independent nodes run MaxConcurrency at a time
// (nodes per second). Comparisons holds the targets: the long chain's
// overhead per node against the short one's, measured in the same run, and
// against the budgets (1 ms per node, 4,000 nodes/s).
type DAGReport struct {
	Nodes             int     `json:"nodes"`
	ShortChain        int     `json:"short_chain"`
	SequentialSeconds float64 `json:"sequential_seconds"`
	ToolSeconds       float64 `json:"tool_seconds"`
	OverheadPerNodeMS float64 `json:"overhead_per_node_ms"`
	ShortOverheadMS   float64 `json:"short_overhead_per_node_ms"`
	ParallelSeconds   float64 `json:"parallel_seconds"`
	ParallelNodesPerS float64 `json:"parallel_nodes_per_sec"`
	MaxConcurrency    int     `json:"max_concurrency"`

	Comparisons []eventbench.Comparison `json:"comparisons"`
}

// DAG runs the DAG benchmark on an embedded server with the projector and
// every agent, sync interval.
func DAG(ctx context.Context, cfg DAGConfig, progress func(string)) (*DAGReport, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 10_000
	}
	if cfg.ShortChain == 0 {
		cfg.ShortChain = 100
	}
	if cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = 64
	}
	srv, err := startServer(ctx, filepath.Join(cfg.DataDir, "dag"), filepath.Join(cfg.DataDir, "work"), &runtime.Config{Concurrency: cfg.MaxConcurrency})
	if err != nil {
		return nil, err
	}
	defer srv.close()
	log, work := srv.log, srv.work
	report := func(s string) { say(progress, s) }

	rep := &DAGReport{Nodes: cfg.Nodes, ShortChain: cfg.ShortChain, MaxConcurrency: cfg.MaxConcurrency}
	// run times one DAG: its measure's PerSec is 1000 / the runtime's
	// overhead per node in ms (wall time less the tools' own), CPUPerOp the
	// process's CPU time per node.
	run := func(name, session string, n, concurrency int, chain bool) (eventbench.Measure, time.Duration, time.Duration, error) {
		report(name)
		var wall time.Duration
		var tools time.Duration
		m, err := eventbench.Time(name, n, func() (err error) {
			wall, err = runDAG(ctx, log, session, n, concurrency, chain, work)
			return err
		})
		if err == nil {
			tools, err = toolTime(ctx, log, session)
		}
		return m, wall, tools, err
	}
	overhead := func(m *eventbench.Measure, wall, tools time.Duration) float64 {
		ms := float64((wall - tools).Microseconds()) / 1000 / float64(m.Ops)
		m.Name += ": runtime overhead per node"
		m.PerSec = 1000 / ms
		return ms
	}
	short, wall, tools, err := run(fmt.Sprintf("chain of %d", cfg.ShortChain), "short", cfg.ShortChain, 1, true)
	if err != nil {
		return nil, err
	}
	rep.ShortOverheadMS = overhead(&short, wall, tools)
	long, wall, tools, err := run(fmt.Sprintf("chain of %d", cfg.Nodes), "long", cfg.Nodes, 1, true)
	if err != nil {
		return nil, err
	}
	rep.SequentialSeconds, rep.ToolSeconds = wall.Seconds(), tools.Seconds()
	rep.OverheadPerNodeMS = overhead(&long, wall, tools)
	wide, wall, _, err := run(fmt.Sprintf("%d independent nodes, %d at a time", cfg.Nodes, cfg.MaxConcurrency), "wide", cfg.Nodes, cfg.MaxConcurrency, false)
	if err != nil {
		return nil, err
	}
	rep.ParallelSeconds = wall.Seconds()
	rep.ParallelNodesPerS = float64(cfg.Nodes) / wall.Seconds()
	wide.PerSec = rep.ParallelNodesPerS

	budget := func(name string, perSec float64) eventbench.Measure {
		return eventbench.Measure{Name: name, Ops: cfg.Nodes, Seconds: float64(cfg.Nodes) / perSec, PerSec: perSec}
	}
	rep.Comparisons = []eventbench.Comparison{
		eventbench.Compare("chain overhead per node, long vs short", long, short, TargetChainFlat),
		eventbench.Compare("chain overhead per node vs 1 ms budget", long, budget("budget: 1 ms per node", 1000/ChainBudgetMS), 1),
		eventbench.Compare(fmt.Sprintf("wide DAG vs %d nodes/s budget", WideBudgetPerSec), wide, budget(fmt.Sprintf("budget: %d nodes/s", WideBudgetPerSec), WideBudgetPerSec), 1),
	}
	return rep, nil
}

// runDAG submits a DAG of n list nodes (an in-process tool: its own time is
// near zero), each depending on the one before if chain, and returns the wall
// time from submission to its workflow_complete. It reads only that event:
// decoding every event of the DAG as it came cost the process it measures
// a tenth of its allocations.
func runDAG(ctx context.Context, log *events.Log, session string, n, concurrency int, chain bool, work string) (time.Duration, error) {
	dag := schemas.DAG{ID: "bench-" + session, Name: "noop", Policy: schemas.Policy{MaxConcurrency: concurrency}}
	for i := range n {
		node := schemas.Node{ID: fmt.Sprintf("n%d", i), Agent: "engineer", Tool: "list", Args: map[string]any{"path": "."}}
		if chain && i > 0 {
			node.DependsOn = []string{fmt.Sprintf("n%d", i-1)}
		}
		dag.Nodes = append(dag.Nodes, node)
	}
	create, _ := schemas.New(schemas.TypeSessionCreate, session, "user", "", time.Now(), schemas.SessionCreate{Name: session})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	exec, err := schemas.New(schemas.TypeDAGExecute, session, "user", "orchestrator", time.Now(), schemas.DAGExecute{DAG: dag, WorkDir: work})
	if err != nil {
		return 0, err
	}
	tail, err := log.Tail(ctx, events.Filter{Session: session, Type: schemas.TypeWorkflowComplete}.Subject(), events.Cursor{})
	if err != nil {
		return 0, err
	}
	defer tail.Stop()
	start := time.Now()
	if _, err := log.AppendBatch(ctx, []*schemas.Envelope{create, resume, exec}); err != nil {
		return 0, err
	}
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			return 0, err
		}
		if ev.Env == nil {
			continue
		}
		wall := time.Since(start)
		p, err := schemas.PayloadAs[schemas.WorkflowComplete](ev.Env)
		if err != nil {
			return 0, err
		}
		if p.Outcome != schemas.OutcomeSucceeded {
			return 0, fmt.Errorf("benchmark DAG %s: %s", p.Outcome, p.Summary)
		}
		return wall, nil
	}
}

// toolTime sums the tools' own durations in a session's tool results.
func toolTime(ctx context.Context, log *events.Log, session string) (time.Duration, error) {
	var sum float64
	err := log.Scan(ctx, events.Filter{Session: session, Type: schemas.TypeToolResult}.Subject(), events.Cursor{}, 0, func(ev *events.Event) error {
		if ev.Env == nil {
			return nil
		}
		p, err := schemas.PayloadAs[schemas.ToolResult](ev.Env)
		if err != nil {
			return err
		}
		sum += p.Seconds()
		return nil
	})
	return time.Duration(sum * float64(time.Second)), err
}
