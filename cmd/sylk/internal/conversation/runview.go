package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Outcome is what `sylk run --json` prints.
type Outcome struct {
	Session string `json:"session"`
	// Request is the user_input event of a request; Plan the plan approved
	// or waiting (Waiting says what waits on the user: plan_approval or a
	// clarification Question).
	Request   string            `json:"request,omitempty"`
	Plan      string            `json:"plan,omitempty"`
	Waiting   string            `json:"waiting,omitempty"`
	Question  string            `json:"question,omitempty"`
	DAG       string            `json:"dag,omitempty"`
	Seq       uint64            `json:"seq"`
	Outcome   string            `json:"outcome,omitempty"`
	Summary   string            `json:"summary,omitempty"`
	Succeeded int               `json:"succeeded"`
	Failed    int               `json:"failed"`
	Skipped   int               `json:"skipped"`
	Duration  string            `json:"duration,omitempty"`
	Nodes     map[string]string `json:"nodes,omitempty"`
	Problems  []string          `json:"problems,omitempty"`
}

// Follow shows the session's events from the submission on until the DAG ends.
func Follow(ctx context.Context, log *events.Log, session string, from uint64, dagID string, view *RunView) error {
	tail, err := log.Tail(ctx, events.Filter{Session: session}.Subject(), events.Cursor{Seq: from})
	if err != nil {
		return err
	}
	defer tail.Stop()
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(view.io.ErrOut, "\nstopped watching; the workflow goes on if a server runs: sylk tail --session %s\n", session)
			}
			return err
		}
		if ev.Env != nil && view.apply(ev.Env, dagID) {
			return nil
		}
	}
}

// Node states as the run view shows them.
const (
	nodeWaiting   = "waiting"
	nodeRunning   = "running"
	nodeSucceeded = "succeeded"
	nodeFailed    = "failed"
	nodeSkipped   = "skipped"
	nodeRetrying  = "retrying"
)

// RunView folds a DAG's events into what the user watches.
type RunView struct {
	io       *cmdutil.IOStreams
	quiet    bool
	dag      *schemas.DAG
	states   map[string]string
	started  time.Time
	bar      *progressbar.ProgressBar
	outcome  string
	summary  string
	problems []string
	duration time.Duration
}

// NewRunView is the view of dag's run; quiet (--json) prints no progress
// and makes End print the outcome as JSON.
func NewRunView(io *cmdutil.IOStreams, dag *schemas.DAG, quiet bool) *RunView {
	v := &RunView{io: io, quiet: quiet, dag: dag, states: map[string]string{}, started: time.Now()}
	for _, n := range dag.Nodes {
		v.states[n.ID] = nodeWaiting
	}
	if io.Terminal && !quiet {
		v.bar = progressbar.NewOptions(len(dag.Nodes), progressbar.OptionSetWriter(io.ErrOut), progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(false), progressbar.OptionSetWidth(30),
			progressbar.OptionSetDescription(dag.Name), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	return v
}

func (v *RunView) count(state string) int {
	n := 0
	for _, s := range v.states {
		if s == state {
			n++
		}
	}
	return n
}

func (v *RunView) elapsed() time.Duration {
	if v.duration > 0 {
		return v.duration
	}
	return time.Since(v.started)
}

// say prints a line about a node, above the progress bar.
func (v *RunView) say(format string, args ...any) {
	if v.quiet {
		return
	}
	if v.bar != nil {
		v.bar.Clear()
	}
	fmt.Fprintf(v.io.ErrOut, "%8s  %s\n", v.elapsed().Round(100*time.Millisecond), fmt.Sprintf(format, args...))
	if v.bar != nil {
		v.bar.RenderBlank()
	}
}

func (v *RunView) done() {
	if v.bar != nil {
		v.bar.Add(1)
	}
}

// apply folds one event; it returns true when the DAG has ended.
func (v *RunView) apply(env *schemas.Envelope, dagID string) bool {
	switch env.Type {
	case schemas.TypeTaskDispatch:
		if p, err := schemas.PayloadAs[schemas.TaskDispatch](env); err == nil && p.DAGID == dagID {
			v.states[p.NodeID] = nodeRunning
			attempt := ""
			if p.Attempt > 1 {
				attempt = fmt.Sprintf(" (attempt %d)", p.Attempt)
			}
			v.say("▶ %s: %s%s", p.NodeID, p.Agent, attempt)
		}
	case schemas.TypeTaskComplete:
		if p, err := schemas.PayloadAs[schemas.TaskComplete](env); err == nil && p.DAGID == dagID {
			v.states[p.NodeID] = nodeSucceeded
			v.done()
			v.say("✓ %s: %s", p.NodeID, render.FirstLine(p.Summary))
		}
	case schemas.TypeTaskFailed:
		if p, err := schemas.PayloadAs[schemas.TaskFailed](env); err == nil && p.DAGID == dagID {
			v.states[p.NodeID] = nodeFailed
			v.say("✗ %s failed (attempt %d): %s", p.NodeID, p.Attempt, render.FirstLine(p.Error))
		}
	case schemas.TypeNodeRetry:
		if p, err := schemas.PayloadAs[schemas.NodeRetry](env); err == nil && p.DAGID == dagID {
			v.states[p.NodeID] = nodeRetrying
			v.say("↻ %s: retrying as attempt %d at %s", p.NodeID, p.Attempt, p.NotBefore.Local().Format("15:04:05"))
		}
	case schemas.TypeNodeSkipped:
		if p, err := schemas.PayloadAs[schemas.NodeSkipped](env); err == nil && p.DAGID == dagID {
			v.states[p.NodeID] = nodeSkipped
			v.done()
			v.say("↷ %s skipped: %s", p.NodeID, p.Reason)
		}
	case schemas.TypePermissionRequest:
		// The agent waits on the user: say what for and how to answer.
		if p, err := schemas.PayloadAs[schemas.PermissionRequest](env); err == nil && p.DAGID == dagID {
			v.say("? %s: %s asks to run %q (%s): sylk permit allow %s, or deny", p.NodeID, p.Agent, p.Target, p.Reason, env.ID)
		}
	case schemas.TypeDAGRejected:
		if p, err := schemas.PayloadAs[schemas.DAGRejected](env); err == nil && p.DAGID == dagID {
			v.outcome, v.problems = "rejected", p.Problems
			v.summary = "the Orchestrator rejected the DAG: " + strings.Join(p.Problems, "; ")
			return true
		}
	case schemas.TypeWorkflowComplete:
		if p, err := schemas.PayloadAs[schemas.WorkflowComplete](env); err == nil && p.DAGID == dagID {
			v.outcome, v.summary, v.duration = p.Outcome, p.Summary, p.Duration
			for id, s := range v.states {
				if s == nodeWaiting || s == nodeRunning || s == nodeRetrying {
					v.states[id] = nodeSkipped
				}
			}
			return true
		}
	}
	return false
}

// End prints the DAG's outcome as out (its ids set by the caller, the rest
// from the view): as JSON with quiet (--json), else as a line. The error is
// exit 3 unless the DAG succeeded.
func (v *RunView) End(out Outcome) error {
	out.Outcome, out.Summary, out.Nodes, out.Problems = v.outcome, v.summary, v.states, v.problems
	out.Succeeded, out.Failed, out.Skipped = v.count(nodeSucceeded), v.count(nodeFailed), v.count(nodeSkipped)
	out.Duration = v.elapsed().Round(time.Millisecond).String()
	if v.quiet {
		if err := v.io.PrintJSON(out); err != nil {
			return err
		}
	} else {
		v.finish()
	}
	if out.Outcome != schemas.OutcomeSucceeded {
		return cmdutil.ExitCodeError{Code: cmdutil.ExitFailure}
	}
	return nil
}

func (v *RunView) finish() {
	if v.bar != nil {
		v.bar.Finish()
	}
	mark := "✓"
	if v.outcome != schemas.OutcomeSucceeded {
		mark = "✗"
	}
	fmt.Fprintf(v.io.Out, "%s %s %s in %s: %s\n", mark, v.dag.Name, v.outcome, v.elapsed().Round(time.Millisecond), v.summary)
}
