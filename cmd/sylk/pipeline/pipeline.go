// Package pipeline is `sylk pipeline`: the single-worker pipelines of DAG
// nodes (ls, show), the user's decision on one that used its loops (ignore,
// fail), and the stop of a chain of Engineer handoffs (stop-handoffs).
package pipeline

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	agentpipeline "github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Options are the flags of `sylk pipeline`.
type Options struct {
	Session string
	State   string
	Reason  string
	JSON    bool
}

func NewCmdPipeline(f *cmdutil.Factory) *cobra.Command {
	opts := &Options{}
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Single-worker pipelines: list, show, and decide on one that used its loops",
		Long: `A DAG node with "pipeline: tdd|standard|review" runs as a single-worker
pipeline: the Engineer with an Inspector and a Tester of its own, looping until
both pass (tdd: criteria, failing tests, implementation, validation). After its
loops (3) the pipeline waits for you: ignore the findings (the node succeeds)
or fail the node. The same question is in the session's pending items
('sylk session show'); /task PIPELINE ... in a session talks to its Engineer.

An Engineer whose context window fills hands its pipeline to a new one that
carries the work on (state handed_off; /task messages to the old id reach the
new one). A chain makes at most 5 handoffs; 'stop-handoffs' ends it sooner:
the Engineer then compacts its conversation instead.`,
		Example: `  sylk pipeline ls
  sylk pipeline ls --state awaiting_user
  sylk pipeline show p-1a2b3c4d5e6f
  sylk pipeline ignore p-1a2b3c4d5e6f --reason "the lint finding is a false positive"
  sylk pipeline fail p-1a2b3c4d5e6f
  sylk pipeline stop-handoffs p-1a2b3c4d5e6f --reason "it keeps rereading the same files"`,
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List pipelines, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsRun(cmd.Context(), f, opts)
		},
	}
	ls.Flags().StringVar(&opts.Session, "session", "", "only this session's pipelines")
	ls.Flags().StringVar(&opts.State, "state", "", "only pipelines in this state (running, awaiting_user, completed, failed, handed_off)")
	ls.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per pipeline")
	show := &cobra.Command{
		Use:   "show PIPELINE",
		Short: "A pipeline's stages, loops, feedback and files",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showRun(cmd.Context(), f, opts, args[0])
		},
	}
	show.Flags().BoolVar(&opts.JSON, "json", false, "the pipeline as JSON")
	decide := func(decision, short string) *cobra.Command {
		c := &cobra.Command{
			Use:   decision + " PIPELINE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return decideRun(cmd.Context(), f, opts, args[0], decision)
			},
		}
		c.Flags().StringVar(&opts.Reason, "reason", "", "why, for the record")
		c.Flags().BoolVar(&opts.JSON, "json", false, "print the appended event as JSON")
		return c
	}
	stop := &cobra.Command{
		Use:   "stop-handoffs PIPELINE",
		Short: "Stop a pipeline's chain of Engineer handoffs: its Engineer compacts instead",
		Long: `Stop the chain of handoffs of a running pipeline (or of the one that carries
its work on): when its Engineer's context window fills again it summarises and
compacts its conversation rather than handing the work to a new pipeline. A
handoff the Engineer had already asked for still happens, and is the last.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return stopRun(cmd.Context(), f, opts, args[0])
		},
	}
	stop.Flags().StringVar(&opts.Reason, "reason", "", "why, for the record")
	stop.Flags().BoolVar(&opts.JSON, "json", false, "print the appended event as JSON")
	cmd.AddCommand(ls, show,
		decide(schemas.DecisionIgnore, "Accept a pipeline's work despite its findings: the node succeeds"),
		decide(schemas.DecisionFail, "Fail a pipeline that waits for you: the node fails"), stop)
	return cmd
}

// stopRun appends the user's stop of a chain of handoffs; a chain that has
// ended, or whose handoffs are stopped already, is refused before anything
// is appended.
func stopRun(ctx context.Context, f *cmdutil.Factory, opts *Options, ref string) error {
	r, p, err := open(ctx, f, ref)
	if err != nil {
		return err
	}
	defer r.Close()
	for p.State == projections.PipelineHandedOff {
		if p, err = r.Pipeline(ctx, p.HandoffTo); err != nil {
			return err
		}
	}
	switch {
	case p.State.Done():
		return fmt.Errorf("pipeline %s is %s: there is no chain of handoffs left to stop", p.ID, p.State)
	case p.HandoffsStopped != "":
		return fmt.Errorf("pipeline %s: its handoffs are stopped already (%s)", p.ID, p.HandoffsStopped)
	}
	payload := schemas.UserStopHandoffs{PipelineID: p.ID, Text: opts.Reason}
	env, err := schemas.New(schemas.TypeUserStopHandoffs, p.Session, "user", agentpipeline.Name, f.Now(), payload)
	if err != nil {
		return err
	}
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "id": env.ID, "pipeline": p.ID})
	}
	fmt.Fprintf(f.IO.Out, "pipeline %s: no more handoffs; its Engineer compacts instead when its window fills (seq %d)\n", p.ID, seq)
	return nil
}

func lsRun(ctx context.Context, f *cmdutil.Factory, opts *Options) error {
	switch projections.PipelineState(opts.State) {
	case "", projections.PipelineRunning, projections.PipelineAwaitingUser, projections.PipelineCompleted, projections.PipelineFailed, projections.PipelineHandedOff:
	default:
		return cmdutil.Usagef("--state %q: one of running, awaiting_user, completed, failed, handed_off", opts.State)
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	ps, err := r.Pipelines(ctx, projections.PipelineFilter{Session: opts.Session, State: projections.PipelineState(opts.State)})
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, p := range ps {
			if err := f.IO.PrintJSON(p); err != nil {
				return err
			}
		}
		return nil
	}
	if len(ps) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no pipelines: a DAG node runs one when it names a pipeline (pipeline: tdd|standard|review)")
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tSESSION\tNODE\tMODE\tSTATE\tSTAGE\tLOOP\tVARIANT")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", p.ID, p.Session, p.Node, p.Mode, p.State, p.Stage, p.Loop, p.MaxLoops, cmdutil.Dash(p.Variant))
	}
	return tw.Flush()
}

// open opens the projections (the caller closes them) and reads a pipeline
// by id, or the latest pipeline of a node of that name.
func open(ctx context.Context, f *cmdutil.Factory, ref string) (*cmdutil.StateReader, *projections.Pipeline, error) {
	r, err := f.State(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := cmdutil.ByIDOrNode(ctx, ref, "'sylk pipeline ls' lists the pipelines", r.Pipeline, r.Pipelines)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, p, nil
}

func showRun(ctx context.Context, f *cmdutil.Factory, opts *Options, ref string) error {
	r, p, err := open(ctx, f, ref)
	if err != nil {
		return err
	}
	defer r.Close()
	if opts.JSON {
		return f.IO.PrintJSON(p)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "pipeline %s (%s) of node %s, DAG %s, session %s\n", p.ID, p.Mode, p.Node, p.DAG, p.Session)
	fmt.Fprintf(w, "state:    %s, stage %s, loop %d of %d\n", p.State, p.Stage, p.Loop, p.MaxLoops)
	if p.StartingCommit != "" {
		fmt.Fprintf(w, "started:  %s at commit %s\n", p.CreatedAt.Local().Format(time.DateTime), cmdutil.ShortCommit(p.StartingCommit))
	}
	if p.Group != "" {
		fmt.Fprintf(w, "variant:  %s of group %s (%s)\n", p.Variant, p.Group, cmdutil.Dash(p.Approach))
	}
	fmt.Fprintf(w, "task:     %s\n", firstLine(p.Prompt))
	for _, s := range p.Stages {
		res := "…"
		if s.ResultSeq != 0 {
			res = "failed"
			if s.Passed {
				res = "passed"
			}
			if s.Tests != nil {
				res += fmt.Sprintf(" (%d passed, %d failed)", s.Tests.Passed, s.Tests.Failed)
			}
			res += ": " + firstLine(s.Summary)
		}
		fmt.Fprintf(w, "  loop %d  %-9s %-9s %s\n", s.Loop, s.Stage, s.Agent, res)
	}
	for _, fb := range p.Feedback {
		fmt.Fprintf(w, "feedback of loop %d from the %s: %s\n", fb.Loop, fb.From, firstLine(fb.Summary))
		for _, is := range fb.Issues {
			fmt.Fprintf(w, "  - %s\n", is)
		}
	}
	for i, m := range p.UserMessages {
		state := "waits for the Engineer's next stage"
		if i < p.Delivered {
			state = "delivered"
		}
		fmt.Fprintf(w, "you said (%s): %s [%s]\n", strings.TrimPrefix(string(m.Type), "user_"), m.Text, state)
	}
	if len(p.FilesChanged) > 0 {
		fmt.Fprintf(w, "files:    %s\n", strings.Join(p.FilesChanged, ", "))
	}
	switch p.State {
	case projections.PipelineAwaitingUser:
		fmt.Fprintf(w, "waiting for you: %s\n", p.Reason)
		for _, x := range p.Findings {
			fmt.Fprintf(w, "  - %s\n", x)
		}
		fmt.Fprintf(w, "decide: sylk pipeline ignore %s | sylk pipeline fail %s\n", p.ID, p.ID)
	case projections.PipelineCompleted:
		fmt.Fprintf(w, "completed: %s\n", firstLine(p.Summary))
	case projections.PipelineFailed:
		fmt.Fprintf(w, "failed: %s\n", firstLine(p.Reason))
	case projections.PipelineHandedOff:
		fmt.Fprintf(w, "handed off to %s: %s (sylk pipeline show %s)\n", p.HandoffTo, p.Reason, p.HandoffTo)
	}
	if why := p.HandoffRefusal(); why != "" && !p.State.Done() {
		fmt.Fprintf(w, "no more handoffs: %s\n", why)
	}
	if h := p.Handoff; h != nil {
		fmt.Fprintf(w, "continues pipeline %s (handoff %d at loop %d: %s)\n", p.HandoffFrom, h.HandoffIndex, h.Loop, h.Reason)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return cmdutil.TruncateRunes(s, 160)
}

// decideRun answers a pipeline waiting for the user; anything else is
// refused before an event is appended.
func decideRun(ctx context.Context, f *cmdutil.Factory, opts *Options, ref, decision string) error {
	r, p, err := open(ctx, f, ref)
	if err != nil {
		return err
	}
	defer r.Close()
	if p.State != projections.PipelineAwaitingUser {
		return fmt.Errorf("pipeline %s is %s, not waiting for a decision: only a pipeline that used its loops is ignored or failed", p.ID, p.State)
	}
	env, err := schemas.New(schemas.TypeClarificationResponse, p.Session, "user", agentpipeline.Name, f.Now(),
		schemas.ClarificationResponse{InReplyTo: p.ID, Answer: decision})
	if err != nil {
		return err
	}
	if opts.Reason != "" {
		env.Metadata = map[string]string{"reason": opts.Reason}
	}
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "id": env.ID, "pipeline": p.ID, "decision": decision})
	}
	what := map[string]string{schemas.DecisionIgnore: "its findings are ignored; the node succeeds", schemas.DecisionFail: "the node fails"}[decision]
	fmt.Fprintf(f.IO.Out, "pipeline %s: %s (seq %d)\n", p.ID, what, seq)
	return nil
}
