package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// handoff takes an Engineer's request to hand its pipeline over (seed
// L27898-28032): it bundles the Engineer's state with what the pipeline's
// Inspector and Tester established (read from the pipeline's record), closes
// the old pipeline and starts a new one from that state at the same loop.
// The seed routes the request through the Architect and the Orchestrator;
// here the pipeline agent, which owns pipelines, makes the handoff itself,
// and the Archivalist keeps it (category pipeline_handoff). The new pipeline
// inherits the /task messages its predecessor's Engineer was not given yet
// and the chain's cap and stop (the Engineer asks before it hands off, so a
// request made just before the user stopped the chain is its last link).
func (a *Agent) handoff(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	r, err := schemas.PayloadAs[schemas.PipelineHandoffRequest](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	pl, err := a.Store.Pipeline(ctx, r.PipelineID)
	if errors.Is(err, projections.ErrNotFound) {
		return notice(d, "unknown-pipeline", schemas.NoticeError, fmt.Sprintf("handoff of pipeline %q: no such pipeline", r.PipelineID), "")
	}
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	if pl.State == projections.PipelineHandedOff && pl.EndSeq > d.Seq {
		return nil, nil // the handoff this request made, handled again: a replay
	}
	if pl.State == projections.PipelineHandedOff {
		next, err := a.Store.Pipeline(ctx, pl.HandoffTo)
		if err != nil {
			return nil, agents.Transient(err, 0)
		}
		return a.next(ctx, d, next) // a redelivery after the handoff: carry on
	}
	if pl.State != projections.PipelineRunning || pl.Stage != schemas.StageImplement || pl.Loop != r.Loop {
		return notice(d, "handoff-refused", schemas.NoticeError, fmt.Sprintf("pipeline %s is %s at %s (loop %d): a handoff is for its running Engineer stage (loop %d)",
			pl.ID, pl.State, pl.Stage, pl.Loop, r.Loop), "")
	}
	index := 1
	if pl.Handoff != nil {
		index = pl.Handoff.HandoffIndex + 1
	}
	id := pipelineID(pl.ID, "handoff", fmt.Sprint(index))
	h := schemas.PipelineHandoff{OldPipelineID: pl.ID, NewPipelineID: id, DAGID: pl.DAG, NodeID: pl.Node, Reason: r.Reason,
		HandoffIndex: index, Loop: pl.Loop, Engineer: r.Engineer, Summary: r.Summary, Inspector: inspectorState(pl), Tester: testerState(pl)}
	if h.Engineer != nil && h.Engineer.OriginalPrompt == "" {
		h.Engineer.OriginalPrompt = pl.Prompt
	}
	he, err := deriveFor(d, pl.ID, schemas.TypePipelineHandoff, "archivalist", "handoff", h)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	started := schemas.PipelineStarted{PipelineID: id, DAGID: pl.DAG, NodeID: pl.Node, Attempt: pl.Attempt, Mode: pl.Mode, Agent: pl.Agent,
		Prompt: pl.Prompt, WorkDir: pl.WorkDir, StartingCommit: pl.StartingCommit, MaxLoops: pl.MaxLoops,
		GroupID: pl.Group, VariantID: pl.Variant, Approach: pl.Approach, Handoff: &h, MaxHandoffs: pl.MaxHandoffs}
	outs, err := a.begin(d, started, "handoff/"+id, pl)
	if err != nil {
		return nil, err
	}
	return append([]*schemas.Envelope{he}, outs...), nil
}

// inspectorState is what the pipeline's Inspector established: its criteria,
// its checks, and the findings of its last failed check.
func inspectorState(pl *projections.Pipeline) *schemas.InspectorHandoffState {
	s := &schemas.InspectorHandoffState{Criteria: pl.Criteria}
	if pl.Handoff != nil && pl.Handoff.Inspector != nil {
		prev := pl.Handoff.Inspector
		s.ChecksPerformed = append(s.ChecksPerformed, prev.ChecksPerformed...)
		s.FixesRemaining = prev.FixesRemaining
	}
	for _, r := range pl.Stages {
		if r.Stage != schemas.StageInspect || r.ResultSeq == 0 {
			continue
		}
		s.ChecksPerformed = append(s.ChecksPerformed, fmt.Sprintf("loop %d: passed=%v %s", r.Loop, r.Passed, firstLine(r.Summary, 200)))
		s.FixesRemaining = nil
		if !r.Passed {
			s.FixesRemaining = r.Issues
		}
		s.ValidationState = map[string]bool{"inspect": r.Passed}
	}
	if s.Criteria == "" && len(s.ChecksPerformed) == 0 {
		return nil
	}
	return s
}

// testerState is what the pipeline's Tester established: its tests and their
// last results.
func testerState(pl *projections.Pipeline) *schemas.TesterHandoffState {
	s := &schemas.TesterHandoffState{TestsCreated: pl.Tests}
	if pl.Handoff != nil && pl.Handoff.Tester != nil {
		s.TestResults = append(s.TestResults, pl.Handoff.Tester.TestResults...)
		s.FailureDescs = pl.Handoff.Tester.FailureDescs
	}
	for _, r := range pl.Stages {
		if (r.Stage != schemas.StageTest && r.Stage != schemas.StageRed) || r.ResultSeq == 0 || r.Tests == nil {
			continue
		}
		t := r.Tests
		s.TestResults = append(s.TestResults, fmt.Sprintf("loop %d %s: %d passed, %d failed, %d skipped", r.Loop, r.Stage, t.Passed, t.Failed, t.Skipped))
		s.FailureDescs = append(append([]string(nil), t.FailedTests...), t.BuildFailed...)
	}
	if s.TestsCreated == "" && len(s.TestResults) == 0 {
		return nil
	}
	return s
}

// handoffPrompt is what the new pipeline's Engineer is told of the state it
// continues from.
func handoffPrompt(h *schemas.PipelineHandoff) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nPipeline handoff %d: you continue the work of pipeline %s, whose Engineer's context window filled (%s). Do not start over.\n",
		h.HandoffIndex, h.OldPipelineID, h.Reason)
	if e := h.Engineer; e != nil {
		list := func(title string, items []string) {
			if len(items) > 0 {
				fmt.Fprintf(&b, "%s:\n- %s\n", title, strings.Join(items, "\n- "))
			}
		}
		list("Accomplished", e.Accomplished)
		list("Files changed", e.FilesChanged)
		list("Remaining", e.Remaining)
		if e.ContextNotes != "" {
			fmt.Fprintf(&b, "Notes: %s\n", e.ContextNotes)
		}
	} else if h.Summary != "" {
		fmt.Fprintf(&b, "The previous Engineer's summary:\n%s\n", h.Summary)
	}
	if s := h.Inspector; s != nil && len(s.FixesRemaining) > 0 {
		fmt.Fprintf(&b, "Inspector's fixes still open:\n- %s\n", strings.Join(s.FixesRemaining, "\n- "))
	}
	if s := h.Tester; s != nil && len(s.FailureDescs) > 0 {
		fmt.Fprintf(&b, "Tests still failing:\n- %s\n", strings.Join(s.FailureDescs, "\n- "))
	}
	return b.String()
}
