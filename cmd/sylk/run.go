package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// RunOptions are the flags of `sylk run`.
type RunOptions struct {
	Plan    string
	Session string
	Detach  bool
	JSON    bool
}

func newRunCmd(f *Factory) *cobra.Command {
	opts := &RunOptions{}
	cmd := &cobra.Command{
		Use:   "run PLAN.yaml",
		Short: "Run a workflow plan (a DAG of tool nodes runs with no LLM)",
		Long: `Validate a plan file, submit it to the Orchestrator in a new session (or the one
given) and show its progress until the workflow completes: node states, a
progress bar on a terminal, failures as they happen. The exit code is 0 only if
every node succeeded.

Tools run in the current directory (a node's args.dir is relative to it). With no
'sylk serve' running on the data directory, run starts an embedded server with
the projections and agents for its own duration.

A plan is YAML (or JSON):

  name: build-and-test
  policy: {max_concurrency: 4, fail_fast: true, retry: {max: 2, backoff: 2s}}
  nodes:
    - id: build
      agent: engineer          # engineer, inspector or tester
      tool: exec               # exec, read_file, write_file, edit_file, list, glob, grep, git_*
      args: {argv: [go, build, ./...]}
    - id: test
      agent: tester
      tool: exec
      args: {argv: [go, test, ./...]}
      depends_on: [build]
      timeout: 5m

Unknown keys are errors naming the key and the node; every problem is listed.`,
		Example: `  sylk run examples/build-and-test.yaml
  sylk run plan.yaml --session S1
  sylk run plan.yaml --detach --json      # with 'sylk serve' running: submit and print ids`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Plan = args[0]
			return runRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "run in this session (default: a new one named after the plan)")
	cmd.Flags().BoolVar(&opts.Detach, "detach", false, "submit and exit (needs a running 'sylk serve')")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the outcome (or, with --detach, the ids) as one JSON object")
	return cmd
}

// runOutcome is what `sylk run --json` prints.
type runOutcome struct {
	Session   string            `json:"session"`
	DAG       string            `json:"dag"`
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

func runRun(ctx context.Context, f *Factory, opts *RunOptions) error {
	src, err := readPlan(f.IO.In, opts.Plan)
	if err != nil {
		return err
	}
	rc := f.RuntimeConfig()
	p, err := plan.Load(src, rc.Catalog())
	if err != nil {
		return usagef("%s: %w", opts.Plan, err)
	}
	if p.DAG.ID == "" {
		p.DAG.ID = schemas.NewID()
	}
	if p.DAG.Name == "" {
		p.DAG.Name = strings.TrimSuffix(filepath.Base(opts.Plan), filepath.Ext(opts.Plan))
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	srv, started, err := f.Server(ctx)
	if err != nil {
		return err
	}
	if opts.Detach && started {
		return usagef("--detach needs a running 'sylk serve' on %s: this run would stop with the command", f.BrokerOptions().DataDir)
	}
	log := events.New(srv.JetStream())
	session := opts.Session
	var submit []*schemas.Envelope
	if session == "" {
		session = schemas.NewID()
		created, err := schemas.New(schemas.TypeSessionCreate, session, "user", "", f.Now(), schemas.SessionCreate{Name: p.DAG.Name, Config: schemas.SessionConfig{WorkDir: wd}})
		if err != nil {
			return err
		}
		resumed, err := created.Derive(schemas.TypeSessionResume, "user", "", f.Now(), schemas.SessionResume{Reason: "sylk run"})
		if err != nil {
			return err
		}
		submit = append(submit, created, resumed)
	} else if err := schemas.CheckName("--session", session); err != nil {
		return usageError{err}
	}
	exec, err := schemas.New(schemas.TypeDAGExecute, session, "user", "orchestrator", f.Now(), schemas.DAGExecute{DAG: p.DAG, WorkDir: wd})
	if err != nil {
		return err
	}
	submit = append(submit, exec)
	seqs, err := log.AppendBatch(ctx, submit)
	if err != nil {
		return err
	}
	seq := seqs[len(seqs)-1]
	out := runOutcome{Session: session, DAG: p.DAG.ID, Seq: seq}
	if opts.Detach {
		if opts.JSON {
			return f.IO.printJSON(out)
		}
		fmt.Fprintf(f.IO.Out, "submitted %s (%d nodes) as DAG %s in session %s; follow it with: sylk tail --session %s\n", p.DAG.Name, len(p.DAG.Nodes), p.DAG.ID, session, session)
		return nil
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.ErrOut, "running %s: %d nodes, DAG %s, session %s\n", p.DAG.Name, len(p.DAG.Nodes), p.DAG.ID, session)
	}
	view := newRunView(f.IO, &p.DAG, opts.JSON)
	if err := follow(ctx, log, session, seq, p.DAG.ID, view); err != nil {
		return err
	}
	out.Outcome, out.Summary, out.Nodes, out.Problems = view.outcome, view.summary, view.states, view.problems
	out.Succeeded, out.Failed, out.Skipped = view.count(nodeSucceeded), view.count(nodeFailed), view.count(nodeSkipped)
	out.Duration = view.elapsed().Round(time.Millisecond).String()
	if opts.JSON {
		if err := f.IO.printJSON(out); err != nil {
			return err
		}
	} else {
		view.finish()
	}
	if out.Outcome != schemas.OutcomeSucceeded {
		return exitCodeError{exitFailure}
	}
	return nil
}

func readPlan(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usagef("plan file %s does not exist", path)
	}
	return b, err
}

// follow shows the session's events from the submission on until the DAG ends.
func follow(ctx context.Context, log *events.Log, session string, from uint64, dagID string, view *runView) error {
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

// runView folds a DAG's events into what the user watches.
type runView struct {
	io       *IOStreams
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

func newRunView(io *IOStreams, dag *schemas.DAG, quiet bool) *runView {
	v := &runView{io: io, quiet: quiet, dag: dag, states: map[string]string{}, started: time.Now()}
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

func (v *runView) count(state string) int {
	n := 0
	for _, s := range v.states {
		if s == state {
			n++
		}
	}
	return n
}

func (v *runView) elapsed() time.Duration {
	if v.duration > 0 {
		return v.duration
	}
	return time.Since(v.started)
}

// say prints a line about a node, above the progress bar.
func (v *runView) say(format string, args ...any) {
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

func (v *runView) done() {
	if v.bar != nil {
		v.bar.Add(1)
	}
}

// apply folds one event; it returns true when the DAG has ended.
func (v *runView) apply(env *schemas.Envelope, dagID string) bool {
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
			v.say("✓ %s: %s", p.NodeID, firstLine(p.Summary))
		}
	case schemas.TypeTaskFailed:
		if p, err := schemas.PayloadAs[schemas.TaskFailed](env); err == nil && p.DAGID == dagID {
			v.states[p.NodeID] = nodeFailed
			v.say("✗ %s failed (attempt %d): %s", p.NodeID, p.Attempt, firstLine(p.Error))
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

func (v *runView) finish() {
	if v.bar != nil {
		v.bar.Finish()
	}
	mark := "✓"
	if v.outcome != schemas.OutcomeSucceeded {
		mark = "✗"
	}
	fmt.Fprintf(v.io.Out, "%s %s %s in %s: %s\n", mark, v.dag.Name, v.outcome, v.elapsed().Round(time.Millisecond), v.summary)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return truncateRunes(s, 160)
}
