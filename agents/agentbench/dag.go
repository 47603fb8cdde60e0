package agentbench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// DAGConfig sizes the DAG benchmark.
type DAGConfig struct {
	DataDir string
	// Nodes in the DAG (default 1000).
	Nodes int
	// MaxConcurrency of the parallel run (default 16).
	MaxConcurrency int
}

// DAGReport is what the DAG benchmark measures: a DAG of no-op tool nodes run
// one node at a time (the runtime's overhead per node: wall time less the
// tools' own time, per node) and all at once (nodes per second).
type DAGReport struct {
	Nodes             int     `json:"nodes"`
	SequentialSeconds float64 `json:"sequential_seconds"`
	ToolSeconds       float64 `json:"tool_seconds"`
	OverheadPerNodeMS float64 `json:"overhead_per_node_ms"`
	ParallelSeconds   float64 `json:"parallel_seconds"`
	ParallelNodesPerS float64 `json:"parallel_nodes_per_sec"`
	MaxConcurrency    int     `json:"max_concurrency"`
}

// DAG runs the DAG benchmark on an embedded server with the projector and
// every agent, sync interval.
func DAG(ctx context.Context, cfg DAGConfig, progress func(string)) (*DAGReport, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 1000
	}
	if cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = 16
	}
	srv, err := startServer(ctx, filepath.Join(cfg.DataDir, "dag"), filepath.Join(cfg.DataDir, "work"), &runtime.Config{Concurrency: cfg.MaxConcurrency})
	if err != nil {
		return nil, err
	}
	defer srv.close()
	log, store, work := srv.log, srv.store, srv.work
	report := func(s string) { say(progress, s) }

	rep := &DAGReport{Nodes: cfg.Nodes, MaxConcurrency: cfg.MaxConcurrency}
	report(fmt.Sprintf("%d no-op nodes, one at a time", cfg.Nodes))
	seq, toolMS, err := runDAG(ctx, log, store, "seq", cfg.Nodes, 1, work)
	if err != nil {
		return nil, err
	}
	rep.SequentialSeconds, rep.ToolSeconds = seq.Seconds(), float64(toolMS)/1000
	rep.OverheadPerNodeMS = (seq.Seconds()*1000 - float64(toolMS)) / float64(cfg.Nodes)
	report(fmt.Sprintf("%d no-op nodes, %d at a time", cfg.Nodes, cfg.MaxConcurrency))
	par, _, err := runDAG(ctx, log, store, "par", cfg.Nodes, cfg.MaxConcurrency, work)
	if err != nil {
		return nil, err
	}
	rep.ParallelSeconds = par.Seconds()
	rep.ParallelNodesPerS = float64(cfg.Nodes) / par.Seconds()
	return rep, nil
}

// runDAG submits a DAG of n independent list nodes (an in-process tool: its
// own time is near zero) and waits for its end. It returns the wall time from
// submission to workflow_complete and the sum of the tools' own durations.
func runDAG(ctx context.Context, log *events.Log, store *projections.Store, session string, n, concurrency int, work string) (time.Duration, int64, error) {
	dag := schemas.DAG{ID: "bench-" + session, Name: "noop", Policy: schemas.Policy{MaxConcurrency: concurrency}}
	for i := range n {
		dag.Nodes = append(dag.Nodes, schemas.Node{ID: fmt.Sprintf("n%d", i), Agent: "engineer", Tool: "list", Args: map[string]any{"path": "."}})
	}
	create, _ := schemas.New(schemas.TypeSessionCreate, session, "user", "", time.Now(), schemas.SessionCreate{Name: session})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	exec, err := schemas.New(schemas.TypeDAGExecute, session, "user", "orchestrator", time.Now(), schemas.DAGExecute{DAG: dag, WorkDir: work})
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := log.AppendBatch(ctx, []*schemas.Envelope{create, resume, exec}); err != nil {
		return 0, 0, err
	}
	tail, err := log.Tail(ctx, events.Filter{Session: session}.Subject(), events.Cursor{})
	if err != nil {
		return 0, 0, err
	}
	defer tail.Stop()
	var toolMS int64
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			return 0, 0, err
		}
		switch {
		case ev.Env == nil:
		case ev.Env.Type == schemas.TypeToolResult:
			if p, err := schemas.PayloadAs[schemas.ToolResult](ev.Env); err == nil {
				toolMS += p.DurationMS
			}
		case ev.Env.Type == schemas.TypeWorkflowComplete:
			wall := time.Since(start)
			p, _ := schemas.PayloadAs[schemas.WorkflowComplete](ev.Env)
			if p.Outcome != schemas.OutcomeSucceeded {
				return 0, 0, fmt.Errorf("benchmark DAG %s: %s", p.Outcome, p.Summary)
			}
			return wall, toolMS, nil
		}
	}
}
