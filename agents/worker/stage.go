package worker

import (
	"context"
	"fmt"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/schemas"
)

// StagePrompter runs the stages of single-worker pipelines (agents/pipeline):
// *PromptLoop.
type StagePrompter interface {
	RunStage(ctx context.Context, d *agents.Delivery, stage *schemas.PipelineStage) ([]*schemas.Envelope, error)
}

// stage handles a pipeline_stage: the agent's loop on the stage's prompt,
// reported to the pipeline as a pipeline_stage_result.
func (w *Worker) stage(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	st, err := schemas.PayloadAs[schemas.PipelineStage](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	sp, ok := w.Prompter.(StagePrompter)
	if !ok {
		return StageOutcome(d, st, nil, Verdict{Summary: "pipeline stages need an LLM; none is configured: " + w.llmHint()})
	}
	return sp.RunStage(ctx, d, st)
}

// RunStage runs one pipeline stage as an agent loop. The criteria stage ends
// with the criteria in words; the Inspector's and the Tester's other stages
// end with a verdict backed by evidence, as their prompt nodes do.
func (p *PromptLoop) RunStage(ctx context.Context, d *agents.Delivery, st *schemas.PipelineStage) ([]*schemas.Envelope, error) {
	// The loop's records (tool calls, LLM keys) are of the node's attempt;
	// the stage's own delivery keeps them apart.
	node := &schemas.TaskDispatch{DAGID: st.DAGID, NodeID: st.NodeID, Attempt: st.Attempt, Agent: st.Agent,
		Prompt: st.Prompt, Timeout: st.Timeout, WorkDir: st.WorkDir}
	exec, err := p.Executors.For(st.WorkDir)
	if err != nil {
		return StageOutcome(d, st, nil, Verdict{Summary: err.Error()})
	}
	l, err := p.newLoop(ctx, d, node, exec, fmt.Sprintf("Pipeline %s, stage %q (loop %d), task %s of workflow %s:\n%s", st.PipelineID, st.Stage, st.Loop, st.NodeID, st.DAGID, st.Prompt))
	if err != nil {
		return nil, err
	}
	l.verdict = reviewer(d.Agent) && st.Stage != schemas.StageCriteria
	l.stage = st
	l.finish = func(v Verdict) ([]*schemas.Envelope, error) { return StageOutcome(d, st, l, v) }
	return l.run(ctx)
}

// StageOutcome is the pipeline_stage_result of a stage's verdict, with the
// test counts and the files written that the loop saw (l may be nil). Its id
// is fixed by the stage's message.
func StageOutcome(d *agents.Delivery, st *schemas.PipelineStage, l *loop, v Verdict) ([]*schemas.Envelope, error) {
	r := schemas.PipelineStageResult{PipelineID: st.PipelineID, Stage: st.Stage, Loop: st.Loop, Passed: v.OK,
		Summary: v.Summary, Evidence: v.Evidence, Issues: v.Issues}
	if l != nil {
		r.FilesChanged = l.written
		if c := l.counts; c != nil {
			r.Tests = &schemas.PipelineTests{Passed: c.Passed, Failed: c.Failed, Skipped: c.Skipped, FailedTests: c.FailedTests, BuildFailed: c.BuildFailed}
		}
	}
	e, err := d.Derive(schemas.TypePipelineStageResult, "pipeline", "stage-result", r)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{e}, nil
}
