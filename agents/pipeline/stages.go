package pipeline

import (
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// stepper collects the events of one step of a pipeline.
type stepper struct {
	pl   *projections.Pipeline
	d    *agents.Delivery
	outs []*schemas.Envelope
	err  error
}

func (s *stepper) emit(t schemas.Type, target, key string, payload any) {
	if s.err != nil {
		return
	}
	e, err := deriveFor(s.d, s.pl.ID, t, target, key, payload)
	if err != nil {
		s.err = err
		return
	}
	s.outs = append(s.outs, e)
}

// stageAgent is who does a stage.
func stageAgent(pl *projections.Pipeline, stage string) string {
	switch stage {
	case schemas.StageCriteria, schemas.StageInspect:
		return "inspector"
	case schemas.StageRed, schemas.StageTest:
		return "tester"
	}
	return pl.Agent
}

// dispatch asks for a stage of a loop.
func (s *stepper) dispatch(stage string, loop int) {
	pl := s.pl
	agent := stageAgent(pl, stage)
	st := schemas.PipelineStage{PipelineID: pl.ID, DAGID: pl.DAG, NodeID: pl.Node, Attempt: pl.Attempt, Stage: stage, Loop: loop,
		Agent: agent, WorkDir: pl.WorkDir, Prompt: stagePrompt(pl, stage, loop)}
	if stage == schemas.StageImplement {
		st.UserMessages = len(pl.EngineerMessages())
	}
	s.emit(schemas.TypePipelineStage, agent, fmt.Sprintf("stage/%s/%d", stage, loop), st)
}

// validate dispatches the validators of the loop the Engineer finished:
// side by side in tdd, the Inspector first otherwise; a validator the user
// ignores is skipped (next completes a pipeline whose validators are all
// waived).
func (s *stepper) validate() {
	pl := s.pl
	inspect, test := !pl.IgnoreInspector, !pl.IgnoreTester && pl.Mode != schemas.PipelineReview
	if pl.Mode != schemas.PipelineTDD && inspect {
		test = false // standard: the Tester follows a passing Inspector
	}
	if inspect {
		s.dispatch(schemas.StageInspect, pl.Loop)
	}
	if test {
		s.dispatch(schemas.StageTest, pl.Loop)
	}
}

// failLoop sends the loop's findings back: feedback events and the next
// loop of the Engineer (or of the Tester, when RED was not shown), or, when
// the loops are used, a question to the user.
func (s *stepper) failLoop(summary string, found []string, ins, tst *projections.PipelineStageRecord) {
	pl := s.pl
	if ins != nil {
		s.emit(schemas.TypeInspectorFeedback, pl.Agent, fmt.Sprintf("feedback/inspector/%d", pl.Loop), schemas.InspectorFeedback{
			PipelineID: pl.ID, Loop: pl.Loop, Summary: ins.Summary, Issues: found})
	}
	if tst != nil {
		fb := schemas.TesterFeedback{PipelineID: pl.ID, Loop: pl.Loop, Summary: tst.Summary}
		if t := tst.Tests; t != nil {
			fb.TestsRun, fb.TestsPassed, fb.Failures = t.Passed+t.Failed, t.Passed, append(t.FailedTests, t.BuildFailed...)
		}
		s.emit(schemas.TypeTesterFeedback, pl.Agent, fmt.Sprintf("feedback/tester/%d", pl.Loop), fb)
	}
	if pl.Loop < pl.MaxLoops {
		next := schemas.StageImplement
		if pl.Stage == schemas.StageRed {
			next = schemas.StageRed
		}
		s.dispatch(next, pl.Loop+1)
		return
	}
	s.emit(schemas.TypePipelineAwaitingUser, "user", "awaiting", schemas.PipelineAwaitingUser{
		PipelineID: pl.ID, Loops: pl.Loop, Reason: fmt.Sprintf("%d loops used: %s", pl.Loop, summary), Findings: found})
	q := schemas.ClarificationRequest{Asker: Name, Options: []string{schemas.DecisionIgnore, schemas.DecisionFail},
		Question: fmt.Sprintf("Pipeline %s (node %s) used its %d loops: %s. Ignore the findings (the node succeeds) or fail it?", pl.ID, pl.Node, pl.Loop, summary),
		Context:  strings.Join(found, "\n")}
	before := len(s.outs)
	s.emit(schemas.TypeClarificationRequest, "user", "decide", q)
	if s.err == nil && len(s.outs) > before {
		s.outs[len(s.outs)-1].CorrelationID = pl.ID // answered with in_reply_to = the pipeline
	}
}

// stagePrompt is what an agent is asked to do in a stage: the task, what
// the earlier stages established, the last loop's findings and what the
// user said.
func stagePrompt(pl *projections.Pipeline, stage string, loop int) string {
	var b strings.Builder
	task := pl.Prompt
	if pl.Approach != "" {
		task += "\nApproach to take: " + pl.Approach
	}
	switch stage {
	case schemas.StageCriteria:
		b.WriteString("State the acceptance criteria of this task before anything is written: what must be true when it is done " +
			"(behaviour, error cases, constraints), each one checkable by a test or a check. Do not change any file. " +
			"Answer with the numbered criteria.\n")
	case schemas.StageRed:
		b.WriteString("Write the tests of this task from the Inspector's criteria, before the implementation exists, and run them. " +
			"They must FAIL now (RED): do not implement the task. Report your verdict as usual; failing tests are expected here.\n")
	case schemas.StageImplement:
		b.WriteString("Implement this task.")
		if pl.Mode == schemas.PipelineTDD {
			b.WriteString(" The Tester's tests define it: make them pass without changing them.")
		}
		b.WriteString("\n")
	case schemas.StageInspect:
		b.WriteString("Validate the Engineer's work on this task against the acceptance criteria (or the task itself): " +
			"read the changed files and run the checks that apply. Pass only what the evidence supports.\n")
	case schemas.StageTest:
		if pl.Mode == schemas.PipelineTDD {
			b.WriteString("Run the tests you wrote for this task, unchanged, against the Engineer's implementation, and report the verdict.\n")
		} else {
			b.WriteString("Write the tests this task's change needs and run them; report the verdict.\n")
		}
	}
	fmt.Fprintf(&b, "\nTask:\n%s\n", task)
	if pl.Criteria != "" && stage != schemas.StageCriteria {
		fmt.Fprintf(&b, "\nAcceptance criteria (Inspector):\n%s\n", pl.Criteria)
	}
	if pl.Tests != "" && stage != schemas.StageRed {
		fmt.Fprintf(&b, "\nTests written (Tester):\n%s\n", pl.Tests)
	}
	if stage == schemas.StageInspect || stage == schemas.StageTest {
		if r := pl.Result(schemas.StageImplement, loop); r != nil {
			fmt.Fprintf(&b, "\nThe Engineer reports:\n%s\n", r.Summary)
		}
		if len(pl.FilesChanged) > 0 {
			fmt.Fprintf(&b, "Files changed: %s\n", strings.Join(pl.FilesChanged, ", "))
		}
	}
	if loop > 1 {
		if fb := findingsOf(pl, loop-1); fb != "" {
			fmt.Fprintf(&b, "\nLoop %d of %d. Findings of loop %d to fix, with their evidence:\n%s", loop, pl.MaxLoops, loop-1, fb)
		}
	}
	if stage == schemas.StageImplement && pl.Handoff != nil {
		b.WriteString(handoffPrompt(pl.Handoff))
	}
	if stage == schemas.StageImplement {
		msgs := pl.EngineerMessages()
		if pl.Delivered < len(msgs) {
			b.WriteString("\nThe user says:\n")
			for _, m := range msgs[pl.Delivered:] {
				kind := "prompt"
				if m.Type == schemas.TypeUserTaskQuery {
					kind = "question (answer it in your report)"
				}
				fmt.Fprintf(&b, "- (%s) %s\n", kind, m.Text)
			}
		}
	}
	return b.String()
}

// findingsOf is what failed in a loop, with the evidence: each failed
// stage's summary, issues, failing tests and the tail of its tool output.
func findingsOf(pl *projections.Pipeline, loop int) string {
	var b strings.Builder
	for _, r := range failed(pl, loop) {
		fmt.Fprintf(&b, "- %s (%s): %s\n", r.Stage, r.Agent, r.Summary)
		for _, is := range r.Issues {
			fmt.Fprintf(&b, "  - %s\n", is)
		}
		if t := r.Tests; t != nil {
			for _, name := range append(append([]string(nil), t.FailedTests...), t.BuildFailed...) {
				fmt.Fprintf(&b, "  - failing: %s\n", name)
			}
		}
		if r.Evidence != "" {
			fmt.Fprintf(&b, "  evidence:\n%s\n", indent(r.Evidence, "    "))
		}
	}
	return b.String()
}

// failed are the stages of a loop that failed and count: RED shown by
// failing tests passes; a validator the user ignores does not count.
func failed(pl *projections.Pipeline, loop int) []projections.PipelineStageRecord {
	var out []projections.PipelineStageRecord
	for _, r := range pl.Stages {
		ok := r.Passed
		if r.Stage == schemas.StageRed {
			ok = red(r.Tests)
		}
		if r.Loop != loop || r.ResultSeq == 0 || ok ||
			(r.Stage == schemas.StageInspect && pl.IgnoreInspector) || (r.Stage == schemas.StageTest && pl.IgnoreTester) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by)
}
