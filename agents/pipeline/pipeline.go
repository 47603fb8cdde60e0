// Package pipeline is the pipeline agent: it runs the DAG nodes that name a
// pipeline (seed L24533-26025) as a loop of stages, each one a
// pipeline_stage for the Engineer, the Inspector or the Tester and a
// pipeline_stage_result back:
//
//   - tdd: the Inspector states acceptance criteria, the Tester writes tests
//     that must fail (RED: the run's parsed results must show failures or a
//     build that fails), the Engineer implements, then the Inspector and the
//     Tester validate side by side;
//   - standard: the Engineer implements, the Inspector reviews, then the
//     Tester writes and runs the task's tests;
//   - review: the Engineer implements and the Inspector reviews.
//
// Findings go back to the Engineer with their evidence (inspector_feedback,
// tester_feedback) for another loop, at most MaxLoops; then the user decides:
// ignore the findings (the node succeeds) or fail it. A /task message
// reaches the Engineer at its next stage (and is worth one more loop if none
// would follow), in the pipeline that carries the work on after handoffs.
//
// Like the Orchestrator it keeps no state of its own: each message makes it
// read the pipeline's projection, caught up with the message and its own
// earlier steps, and append what
// follows, with ids fixed by the pipeline and the step, so a redelivery or a
// second process deciding the same step appends it once. Variants: see
// variants.go.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Name is the pipeline agent's name.
const Name = "pipeline"

// Store is what the agent reads: *projections.Store.
type Store interface {
	agents.Caught
	agents.ToolRecords
	Pipeline(ctx context.Context, id string) (*projections.Pipeline, error)
	Pipelines(ctx context.Context, f projections.PipelineFilter) ([]*projections.Pipeline, error)
	VariantGroup(ctx context.Context, id string) (*projections.VariantGroup, error)
	VariantGroups(ctx context.Context, f projections.PipelineFilter) ([]*projections.VariantGroup, error)
	DAG(ctx context.Context, id string) (*projections.DAG, error)
}

// Agent runs pipelines.
type Agent struct {
	Store Store
	// Executors run the agent's git commands (snapshots, worktrees).
	Executors *worker.Executors
	// Records finds their recorded results (default: Store).
	Records agents.ToolRecords
	// MaxLoops is how many implement-validate loops a pipeline makes before
	// the user decides (default schemas.DefaultPipelineLoops).
	MaxLoops int
	// MaxHandoffs caps a chain of Engineer handoffs (default
	// schemas.DefaultPipelineHandoffs).
	MaxHandoffs int
	// WorktreeDir is where variants' worktrees go, one directory per group.
	WorktreeDir string
}

// Handle takes the messages addressed to the pipeline agent.
func (a *Agent) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	// The message and the agent's own earlier steps are what a step is
	// decided from: waiting for the stream's last sequence would cost a
	// request at every step.
	if err := agents.CatchUpFloor(ctx, d, a.Store); err != nil {
		return nil, err
	}
	switch d.Env.Type {
	case schemas.TypeTaskDispatch:
		return a.start(ctx, d)
	case schemas.TypePipelineStageResult:
		p, err := schemas.PayloadAs[schemas.PipelineStageResult](d.Env)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		return a.step(ctx, d, p.PipelineID)
	case schemas.TypeUserTaskPrompt, schemas.TypeUserTaskQuery, schemas.TypeUserTaskInterrupt,
		schemas.TypeUserIgnoreInspector, schemas.TypeUserIgnoreTester, schemas.TypeUserStopHandoffs:
		return a.user(ctx, d)
	case schemas.TypeClarificationResponse:
		return a.decide(ctx, d)
	case schemas.TypePipelineHandoffRequest:
		return a.handoff(ctx, d)
	case schemas.TypeVariantRequest:
		return a.variant(ctx, d)
	case schemas.TypeVariantSelect:
		return a.selectVariant(ctx, d)
	}
	return nil, agents.Unhandled(Name, d.Env.Type)
}

func (a *Agent) records() agents.ToolRecords {
	if a.Records != nil {
		return a.Records
	}
	return a.Store
}

func (a *Agent) maxLoops() int {
	if a.MaxLoops > 0 {
		return a.MaxLoops
	}
	return schemas.DefaultPipelineLoops
}

func (a *Agent) maxHandoffs() int {
	if a.MaxHandoffs > 0 {
		return a.MaxHandoffs
	}
	return schemas.DefaultPipelineHandoffs
}

// pipelineID names the pipeline of a node's attempt; a variant's is named by
// its group and variant.
func pipelineID(parts ...string) string { return "p-" + tools.CallID(parts...)[:12] }

// ID is the id of the pipeline of a node's attempt (the first pipeline of a
// chain of handoffs).
func ID(dag, node string, attempt int) string { return pipelineID(dag, node, fmt.Sprint(attempt)) }

// start creates the pipeline of a dispatched node, with a snapshot of its
// work directory as the starting commit, and dispatches its first stage.
func (a *Agent) start(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	node, err := schemas.PayloadAs[schemas.TaskDispatch](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if node.Pipeline == "" || !slices.Contains(schemas.PipelineModes(), node.Pipeline) {
		return worker.Outcome(d, node, "", worker.Verdict{Summary: fmt.Sprintf("node %s names no known pipeline (%q; known: %s)",
			node.NodeID, node.Pipeline, strings.Join(schemas.PipelineModes(), ", "))})
	}
	id := ID(node.DAGID, node.NodeID, node.Attempt)
	if pl, err := a.Store.Pipeline(ctx, id); err == nil {
		return a.next(ctx, d, pl) // a redelivery: carry on from the record
	} else if !errors.Is(err, projections.ErrNotFound) {
		return nil, agents.Transient(err, 0)
	}
	where := agents.ToolWhere{DAGID: node.DAGID, NodeID: node.NodeID, Attempt: node.Attempt}
	commit, err := a.git(ctx, d, node.WorkDir, id+"/start", snapshotScript, where)
	if err != nil {
		var class agents.Class
		if class, _ = agents.Classify(ctx, err); class != agents.ClassPermanent && !isGitFailure(err) {
			return nil, err
		}
		return worker.Outcome(d, node, "", worker.Verdict{Summary: "the pipeline could not take its starting commit: " + err.Error()})
	}
	started := schemas.PipelineStarted{PipelineID: id, DAGID: node.DAGID, NodeID: node.NodeID, Attempt: node.Attempt,
		Mode: node.Pipeline, Agent: node.Agent, Prompt: node.Prompt, WorkDir: node.WorkDir, StartingCommit: commit, MaxLoops: a.maxLoops(),
		MaxHandoffs: a.maxHandoffs()}
	return a.begin(d, started, "start", nil)
}

// isGitFailure reports whether err is a git command that ran and failed (as
// opposed to the machinery around it).
func isGitFailure(err error) bool { return strings.HasPrefix(err.Error(), "git in ") }

// begin appends a pipeline_started and its first stage, derived from d; a
// pipeline started by a handoff continues prev.
func (a *Agent) begin(d *agents.Delivery, p schemas.PipelineStarted, key string, prev *projections.Pipeline) ([]*schemas.Envelope, error) {
	env, err := d.Derive(schemas.TypePipelineStarted, "user", key+"/started", p)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	pl := &projections.Pipeline{ID: p.PipelineID, Session: d.Env.SessionID, DAG: p.DAGID, Node: p.NodeID, Attempt: p.Attempt,
		Mode: p.Mode, Agent: p.Agent, Prompt: p.Prompt, WorkDir: p.WorkDir, StartingCommit: p.StartingCommit, MaxLoops: p.MaxLoops,
		State: projections.PipelineRunning, Group: p.GroupID, Variant: p.VariantID, Approach: p.Approach, Handoff: p.Handoff,
		MaxHandoffs: p.MaxHandoffs}
	if prev != nil {
		pl.Carry(prev) // as the projection does: its first stage gets the messages
	}
	first, loop := schemas.StageImplement, 1
	switch {
	case p.Handoff != nil:
		// The Engineer's stage goes on in the new pipeline, at its loop.
		loop = max(1, p.Handoff.Loop)
		if s := p.Handoff.Inspector; s != nil {
			pl.Criteria = s.Criteria
		}
		if s := p.Handoff.Tester; s != nil {
			pl.Tests = s.TestsCreated
		}
	case p.Mode == schemas.PipelineTDD:
		first = schemas.StageCriteria
	}
	s := &stepper{pl: pl, d: d}
	s.dispatch(first, loop)
	if s.err != nil {
		return nil, agents.Permanent(s.err)
	}
	return append([]*schemas.Envelope{env}, s.outs...), nil
}

// step reads a pipeline and appends what follows.
func (a *Agent) step(ctx context.Context, d *agents.Delivery, id string) ([]*schemas.Envelope, error) {
	pl, err := a.Store.Pipeline(ctx, id)
	if errors.Is(err, projections.ErrNotFound) {
		return nil, agents.Permanent(fmt.Errorf("pipeline %q: %w", id, err))
	}
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	return a.next(ctx, d, pl)
}

// next works out the step after a running pipeline's last results: the next
// stage, feedback and another loop, a question to the user, or the end.
func (a *Agent) next(ctx context.Context, d *agents.Delivery, pl *projections.Pipeline) ([]*schemas.Envelope, error) {
	if pl.State != projections.PipelineRunning || len(pl.Waiting) > 0 {
		return nil, nil
	}
	s := &stepper{pl: pl, d: d}
	switch pl.Stage {
	case schemas.StageCriteria:
		r := pl.Result(pl.Stage, pl.Loop)
		if !r.Passed {
			return a.fail(ctx, d, pl, "the Inspector stated no acceptance criteria: "+r.Summary)
		}
		s.dispatch(schemas.StageRed, pl.Loop)
	case schemas.StageRed:
		r := pl.Result(pl.Stage, pl.Loop)
		if red(r.Tests) {
			s.dispatch(schemas.StageImplement, pl.Loop)
			break
		}
		why := "the tests do not fail before the implementation (RED): " + r.Summary
		if r.Tests == nil || r.Tests.Passed+r.Tests.Failed == 0 {
			why = "no test run reported results, so RED is not shown: " + r.Summary
		}
		s.failLoop(why, findings(pl), nil, nil)
	case schemas.StageImplement:
		r := pl.Result(pl.Stage, pl.Loop)
		if !r.Passed {
			s.failLoop("the Engineer did not finish: "+r.Summary, findings(pl), nil, nil)
			break
		}
		if pl.IgnoreInspector && (pl.IgnoreTester || pl.Mode == schemas.PipelineReview) {
			return a.complete(ctx, d, pl, true) // the user waived every validator
		}
		s.validate()
	case schemas.StageInspect, schemas.StageTest:
		ins, tst := pl.Result(schemas.StageInspect, pl.Loop), pl.Result(schemas.StageTest, pl.Loop)
		insFailed := ins != nil && ins.ResultSeq != 0 && !ins.Passed && !pl.IgnoreInspector
		tstFailed := tst != nil && tst.ResultSeq != 0 && !tst.Passed && !pl.IgnoreTester
		switch {
		case insFailed || tstFailed:
			s.failLoop(findingsSummary(ins, tst, insFailed, tstFailed), findings(pl), pick(ins, insFailed), pick(tst, tstFailed))
		case pl.Mode == schemas.PipelineStandard && pl.Stage == schemas.StageInspect && !pl.IgnoreTester:
			s.dispatch(schemas.StageTest, pl.Loop)
		case pl.Delivered < len(pl.EngineerMessages()) && pl.Loop < pl.MaxLoops:
			s.dispatch(schemas.StageImplement, pl.Loop+1) // the user spoke: the Engineer hears it
		default:
			return a.complete(ctx, d, pl, false)
		}
	}
	if s.err != nil {
		return nil, agents.Permanent(s.err)
	}
	return s.outs, nil
}

// red reports whether a test run shows the RED of TDD: tests that fail, or
// a package that does not build without the implementation.
func red(t *schemas.PipelineTests) bool { return t != nil && (t.Failed > 0 || len(t.BuildFailed) > 0) }

func pick(r *projections.PipelineStageRecord, failed bool) *projections.PipelineStageRecord {
	if failed {
		return r
	}
	return nil
}

func findingsSummary(ins, tst *projections.PipelineStageRecord, insFailed, tstFailed bool) string {
	var parts []string
	if insFailed {
		parts = append(parts, "Inspector: "+ins.Summary)
	}
	if tstFailed {
		parts = append(parts, "Tester: "+tst.Summary)
	}
	return strings.Join(parts, "; ")
}

// findings lists what failed in the current loop, for the user.
func findings(pl *projections.Pipeline) []string {
	var out []string
	for _, r := range failed(pl, pl.Loop) {
		out = append(out, r.Agent+": "+r.Summary)
		out = append(out, r.Issues...)
		if r.Tests != nil {
			for _, t := range r.Tests.FailedTests {
				out = append(out, "failing: "+t)
			}
		}
	}
	return out
}

// complete ends a pipeline that passed (or whose findings the user ignored):
// a snapshot of its work, pipeline_complete and, outside a variant group,
// the node's task_complete.
func (a *Agent) complete(ctx context.Context, d *agents.Delivery, pl *projections.Pipeline, ignored bool) ([]*schemas.Envelope, error) {
	where := agents.ToolWhere{DAGID: pl.DAG, NodeID: pl.Node, Attempt: pl.Attempt}
	var end string
	files := pl.FilesChanged
	if pl.StartingCommit != "" {
		var err error
		if end, err = a.git(ctx, d, pl.WorkDir, pl.ID+"/end", snapshotScript, where); err != nil {
			if !isGitFailure(err) {
				return nil, err
			}
			end = ""
		}
		if end != "" && pl.Variant != "" && pl.Variant != "original" {
			// A variant's worktree holds its work alone: git knows its files.
			out, err := a.git(ctx, d, pl.WorkDir, pl.ID+"/files", "git diff --name-only "+shellQuote(pl.StartingCommit)+" "+shellQuote(end), where)
			if err != nil && !isGitFailure(err) {
				return nil, err
			}
			if err == nil {
				files = strings.Fields(out)
			}
		}
	}
	summary := lastImplement(pl)
	if ignored {
		summary = "findings ignored by the user; " + summary
	}
	outs := []*schemas.Envelope{}
	e, err := deriveFor(d, pl.ID, schemas.TypePipelineComplete, "user", "complete", schemas.PipelineComplete{PipelineID: pl.ID, DAGID: pl.DAG, NodeID: pl.Node,
		Loops: pl.Loop, Summary: summary, Ignored: ignored, EndCommit: end, FilesChanged: files})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	outs = append(outs, e)
	if pl.Group != "" {
		more, err := a.variantEnded(ctx, d, pl, true)
		return append(outs, more...), err
	}
	tc, err := deriveFor(d, pl.ID, schemas.TypeTaskComplete, "orchestrator", "outcome", schemas.TaskComplete{DAGID: pl.DAG, NodeID: pl.Node, Attempt: pl.Attempt,
		Summary: fmt.Sprintf("pipeline %s (%s) passed in %d loop(s): %s", pl.ID, pl.Mode, pl.Loop, summary), Evidence: evidenceOf(pl)})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return append(outs, tc), nil
}

// fail ends a pipeline that failed: pipeline_failed and, outside a variant
// group, the node's task_failed (not retried: the loops were its retries).
func (a *Agent) fail(ctx context.Context, d *agents.Delivery, pl *projections.Pipeline, reason string) ([]*schemas.Envelope, error) {
	e, err := deriveFor(d, pl.ID, schemas.TypePipelineFailed, "user", "failed", schemas.PipelineFailed{PipelineID: pl.ID, DAGID: pl.DAG, NodeID: pl.Node, Loops: pl.Loop, Reason: reason})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	outs := []*schemas.Envelope{e}
	if pl.Group != "" {
		more, err := a.variantEnded(ctx, d, pl, false)
		return append(outs, more...), err
	}
	tf, err := deriveFor(d, pl.ID, schemas.TypeTaskFailed, "orchestrator", "outcome", schemas.TaskFailed{DAGID: pl.DAG, NodeID: pl.Node, Attempt: pl.Attempt,
		Error: fmt.Sprintf("pipeline %s failed: %s", pl.ID, reason), Evidence: evidenceOf(pl)})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return append(outs, tf), nil
}

func lastImplement(pl *projections.Pipeline) string {
	for i := len(pl.Stages) - 1; i >= 0; i-- {
		if s := pl.Stages[i]; s.Stage == schemas.StageImplement && s.ResultSeq != 0 {
			return s.Summary
		}
	}
	return ""
}

// evidenceOf is each stage's outcome, one line each.
func evidenceOf(pl *projections.Pipeline) string {
	var b strings.Builder
	for _, s := range pl.Stages {
		if s.ResultSeq == 0 {
			continue
		}
		fmt.Fprintf(&b, "loop %d %s (%s): passed=%v %s\n", s.Loop, s.Stage, s.Agent, s.Passed, firstLine(s.Summary, 200))
	}
	return strings.TrimSpace(b.String())
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// deriveFor builds an event of owner (a pipeline, or a variant group for
// the events about all of it) with an id fixed by owner and key alone:
// whichever message decides a step first (whichever variant ends last), it
// is appended once, and a re-execution derives the same id (the pipeline's
// creation time is the clock of the run that started it: not part of the
// id).
func deriveFor(d *agents.Delivery, owner string, t schemas.Type, target, key string, payload any) (*schemas.Envelope, error) {
	e, err := d.Derive(t, target, owner+"/"+key, payload)
	if err != nil {
		return nil, err
	}
	e.ID = schemas.DeriveID(&schemas.Envelope{ID: owner}, Name+"/"+key)
	return e, nil
}

// user handles a /task message, for the pipeline that carries on the work
// of the one it names (see carrier): an interrupt fails the pipeline; an
// ignore may settle the loop it waits on; prompts wait for the Engineer's
// next stage; a stop of the chain of handoffs is read by the Engineer when
// its window fills.
func (a *Agent) user(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	v, err := schemas.DecodePayload(d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	m := schemas.TaskMessageOf(v)
	pl, err := a.carrier(ctx, m.PipelineID)
	if errors.Is(err, projections.ErrNotFound) {
		return notice(d, "unknown-pipeline", schemas.NoticeError, fmt.Sprintf("no pipeline %q", m.PipelineID), "sylk pipeline ls lists them")
	}
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	if pl.State.Done() {
		if d.Seq < pl.EndSeq {
			return nil, nil // handled before the pipeline ended: a replay
		}
		return notice(d, "pipeline-ended", schemas.NoticeWarn, fmt.Sprintf("pipeline %s is %s; the message was not delivered", pl.ID, pl.State), "")
	}
	switch d.Env.Type {
	case schemas.TypeUserTaskInterrupt:
		return a.fail(ctx, d, pl, "interrupted by the user: "+m.Text)
	case schemas.TypeUserIgnoreInspector, schemas.TypeUserIgnoreTester:
		if pl.State == projections.PipelineAwaitingUser && len(failed(pl, pl.Loop)) == 0 {
			return a.complete(ctx, d, pl, true)
		}
		return a.next(ctx, d, pl)
	}
	return nil, nil
}

// carrier reads the pipeline that carries on the work of pipeline id: id
// itself, or the last of its chain of handoffs, which the projection gives
// the /task messages sent to an earlier one.
func (a *Agent) carrier(ctx context.Context, id string) (*projections.Pipeline, error) {
	for {
		pl, err := a.Store.Pipeline(ctx, id)
		if err != nil || pl.State != projections.PipelineHandedOff {
			return pl, err
		}
		id = pl.HandoffTo
	}
}

// decide takes the user's answer to a pipeline waiting on them: ignore the
// findings (the node succeeds) or fail the node.
func (a *Agent) decide(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.ClarificationResponse](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	pl, err := a.Store.Pipeline(ctx, p.InReplyTo)
	if errors.Is(err, projections.ErrNotFound) {
		return notice(d, "unknown-pipeline", schemas.NoticeError, fmt.Sprintf("no pipeline %q waits for an answer", p.InReplyTo), "sylk pipeline ls --state awaiting_user")
	}
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	if pl.State.Done() && d.Seq < pl.EndSeq {
		return nil, nil // the answer that ended it, handled again: a replay
	}
	if pl.State != projections.PipelineAwaitingUser {
		return notice(d, "not-waiting", schemas.NoticeError, fmt.Sprintf("pipeline %s is %s, not waiting for a decision", pl.ID, pl.State), "")
	}
	switch strings.ToLower(strings.TrimSpace(p.Answer)) {
	case schemas.DecisionIgnore:
		return a.complete(ctx, d, pl, true)
	case schemas.DecisionFail:
		return a.fail(ctx, d, pl, "failed by the user after "+fmt.Sprint(pl.Loop)+" loops: "+strings.Join(pl.Findings, "; "))
	}
	return notice(d, "bad-decision", schemas.NoticeError, fmt.Sprintf("%q is not a decision for pipeline %s", p.Answer, pl.ID),
		"answer ignore or fail: sylk pipeline ignore|fail "+pl.ID)
}

func notice(d *agents.Delivery, key, level, text, hint string) ([]*schemas.Envelope, error) {
	e, err := d.Derive(schemas.TypeNotice, "user", key, schemas.Notice{Level: level, Text: text, Hint: hint})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{e}, nil
}
