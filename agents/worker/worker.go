// Package worker runs tool nodes for the agents that execute DAG work: the
// Engineer, the Inspector and the Tester. Each is a Worker with its own way of
// judging a tool's result: the Engineer by its exit status, the Inspector and
// the Tester by evidence parsed from the output (no evidence, no success).
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/planguard"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Verdict is a worker's judgement of a tool result.
type Verdict struct {
	OK       bool
	Summary  string
	Evidence string
	// Retryable marks a failure worth another attempt under the DAG's retry
	// policy (a flaky command), as opposed to a refusal.
	Retryable bool
	// Issues are a reviewer's findings.
	Issues []string
	// Extra events to append with the task's outcome (test_results, ...).
	Extra []Extra
}

// Extra is an event a verdict adds, addressed to Target (the user when
// empty).
type Extra struct {
	Type    schemas.Type
	Payload any
	Target  string
}

// Judge turns a tool result into a verdict.
type Judge func(node *schemas.TaskDispatch, res schemas.ToolResult) Verdict

// Prompter runs prompt nodes: the LLM tier. Nil means prompt nodes fail with a
// message saying how to configure an LLM.
type Prompter interface {
	RunPrompt(ctx context.Context, d *agents.Delivery, node *schemas.TaskDispatch) ([]*schemas.Envelope, error)
}

// Worker handles task_dispatch messages for one agent kind.
type Worker struct {
	Agent string
	// Executors returns the tool executor for a work directory.
	Executors *Executors
	Records   agents.ToolRecords
	Judge     Judge
	// Prepare, when set, adjusts a node's tool arguments before the call (the
	// Tester asks go test for per-test results).
	Prepare func(args map[string]any) map[string]any
	// Observe, when set, makes an observer for a node's tool call: it sees
	// every line the tool writes, before truncation, and what it derives is
	// recorded with the result (the Tester counts test results: CountTests).
	Observe  func(node *schemas.TaskDispatch) agents.ToolObserver
	Prompter Prompter
	// LLMHint says how to configure an LLM, for prompt nodes without one.
	LLMHint string
	// Plans, when set, keeps a session in plan mode read-only (planguard).
	Plans planguard.State
}

// Domain are the message types a worker handles (the Step 0 hook reroutes
// the others): its nodes, the stages of the pipelines it works in, the
// pipelines' feedback to the Engineer, and the answers to its consultations.
var Domain = []schemas.Type{schemas.TypeTaskDispatch, schemas.TypePipelineStage, schemas.TypeInspectorFeedback, schemas.TypeTesterFeedback,
	schemas.TypeConsultResponse}

// Handle runs one dispatched node.
func (w *Worker) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	switch d.Env.Type {
	case schemas.TypeTaskDispatch:
	case schemas.TypePipelineStage:
		return w.stage(ctx, d)
	case schemas.TypeInspectorFeedback, schemas.TypeTesterFeedback:
		// A pipeline's feedback to its Engineer: the Engineer reads it in
		// its next stage's prompt, which the pipeline writes from it.
		return nil, nil
	case schemas.TypeConsultResponse:
		return nil, nil // the asking loop read it from the consults projection
	default:
		return nil, agents.Unhandled(w.Agent, d.Env.Type)
	}
	node, err := schemas.PayloadAs[schemas.TaskDispatch](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if node.Prompt != "" {
		if w.Prompter == nil {
			return w.outcome(d, node, "", Verdict{Summary: "prompt nodes need an LLM; none is configured: " + w.llmHint()})
		}
		return w.Prompter.RunPrompt(ctx, d, node)
	}
	if err := waitUntil(ctx, node.NotBefore); err != nil {
		return nil, err
	}
	exec, err := w.Executors.For(node.WorkDir)
	if err != nil {
		return w.outcome(d, node, "", Verdict{Summary: err.Error()})
	}
	if w.Prepare != nil {
		node.Args = w.Prepare(node.Args)
	}
	args, err := json.Marshal(node.Args)
	if err != nil {
		return nil, agents.Permanent(fmt.Errorf("node %s: args: %w", node.NodeID, err))
	}
	call := tools.Call{ID: tools.CallID(d.Env.ID, node.NodeID), Tool: node.Tool, Args: args}
	runCtx := ctx
	if node.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, node.Timeout)
		defer cancel()
	}
	var obs agents.ToolObserver
	if w.Observe != nil {
		obs = w.Observe(node)
	}
	guarded, err := planguard.WrapCall(ctx, exec, w.Plans, d.Env.SessionID, call)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	res, _, err := d.RunToolLast(runCtx, guarded, w.Records, call, agents.ToolWhere{DAGID: node.DAGID, NodeID: node.NodeID, Attempt: node.Attempt}, obs)
	if err != nil {
		return nil, err
	}
	if runCtx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		res.TimedOut = true
		res.Error = fmt.Sprintf("node timeout %s reached; %s", node.Timeout, res.Error)
	}
	return w.outcome(d, node, call.ID, w.Judge(node, res))
}

func (w *Worker) llmHint() string {
	if w.LLMHint != "" {
		return w.LLMHint
	}
	return "set --llm-base-url and --llm-model (or SYLK_LLM_BASE_URL, SYLK_LLM_MODEL) and OPENAI_API_KEY"
}

func (w *Worker) outcome(d *agents.Delivery, node *schemas.TaskDispatch, callID string, v Verdict) ([]*schemas.Envelope, error) {
	return Outcome(d, node, callID, v)
}

// Outcome is the task_complete or task_failed of a verdict for the
// orchestrator, after the verdict's extra events. Its ids are fixed by the
// dispatch, so a redelivery appends it once.
func Outcome(d *agents.Delivery, node *schemas.TaskDispatch, callID string, v Verdict) ([]*schemas.Envelope, error) {
	var outs []*schemas.Envelope
	for i, x := range v.Extra {
		target := x.Target
		if target == "" {
			target = "user"
		}
		e, err := d.Derive(x.Type, target, fmt.Sprintf("extra/%d", i), x.Payload)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		outs = append(outs, e)
	}
	var e *schemas.Envelope
	var err error
	if v.OK {
		e, err = d.Derive(schemas.TypeTaskComplete, "orchestrator", "outcome", schemas.TaskComplete{
			DAGID: node.DAGID, NodeID: node.NodeID, Attempt: node.Attempt, CallID: callID, Summary: v.Summary, Evidence: v.Evidence,
		})
	} else {
		e, err = d.Derive(schemas.TypeTaskFailed, "orchestrator", "outcome", schemas.TaskFailed{
			DAGID: node.DAGID, NodeID: node.NodeID, Attempt: node.Attempt, CallID: callID, Error: v.Summary,
			Retryable: v.Retryable, Evidence: v.Evidence,
		})
	}
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return append(outs, e), nil
}

func waitUntil(ctx context.Context, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	wait := time.Until(t)
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Executors builds and keeps one tool executor per work directory.
type Executors struct {
	// Options are the base options; WorkDir is set per directory.
	Options tools.Options
	// DefaultDir is used for nodes with no work directory.
	DefaultDir string
	// StandIn, when set, is used in place of a work directory that does not
	// exist: a re-execution serves every tool call from its recording, and a
	// directory the recorded run removed since (a variant's worktree, gone
	// once the user selected) must not keep its agents from working.
	StandIn string

	mu    sync.Mutex
	byDir map[string]*tools.Executor
}

// For returns the executor of dir (DefaultDir when empty).
func (e *Executors) For(dir string) (*tools.Executor, error) {
	if dir == "" {
		dir = e.DefaultDir
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ex, ok := e.byDir[dir]; ok {
		return ex, nil
	}
	opts := e.Options
	opts.WorkDir = dir
	if _, err := os.Stat(dir); e.StandIn != "" && errors.Is(err, fs.ErrNotExist) {
		opts.WorkDir = e.StandIn
	}
	ex, err := tools.NewExecutor(opts)
	if err != nil {
		return nil, fmt.Errorf("work directory %q: %w", dir, err)
	}
	if e.byDir == nil {
		e.byDir = map[string]*tools.Executor{}
	}
	e.byDir[dir] = ex
	return ex, nil
}
