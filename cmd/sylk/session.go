package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// SessionOptions are the flags of the `sylk session` commands.
type SessionOptions struct {
	ID       string
	Name     string
	State    string
	Summary  string
	NoSwitch bool
	JSON     bool
}

func newSessionCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, list, show, switch, suspend, resume and complete sessions",
		Long: `A session is the unit of isolation: its own context, DAGs, checkpoints and
history. Its states are created, active, suspended, completed and failed; the
legal moves are created→active, active→suspended, suspended→active,
active→completed, suspended→completed and active→failed.

These commands append session events; the projection decides the state. A
request the current state does not allow is refused before anything is
appended, naming the state and the moves it allows. Any number of sessions may
be active; the focused one (marked * in the list) is the one the last switch
went to, and a switch suspends it.`,
	}
	cmd.AddCommand(newSessionNewCmd(f), newSessionListCmd(f), newSessionShowCmd(f),
		newSessionMoveCmd(f, projections.MoveSwitch), newSessionMoveCmd(f, projections.MoveSuspend),
		newSessionMoveCmd(f, projections.MoveResume), newSessionMoveCmd(f, projections.MoveComplete))
	return cmd
}

func newSessionNewCmd(f *Factory) *cobra.Command {
	opts := &SessionOptions{}
	cmd := &cobra.Command{
		Use:   "new [NAME]",
		Short: "Create a session and switch to it",
		Long: `Create a session and switch to it: it becomes active and focused, and the
session focused until now is suspended. With --no-switch it is only created.`,
		Example: `  sylk session new "auth refactor"
  sylk session new --id S1 --no-switch
  id=$(sylk session new demo --json | jq -r .id)`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if opts.ID != "" {
				if err := schemas.CheckName("--id", opts.ID); err != nil {
					return usageError{err}
				}
			}
			return sessionNewRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.ID, "id", "", "the session id (default: a new s-xxxxxxxx)")
	cmd.Flags().BoolVar(&opts.NoSwitch, "no-switch", false, "only create it; leave the focus where it is")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the new session as JSON")
	return cmd
}

func newSessionID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "s-" + hex.EncodeToString(b)
}

// sessionEvent builds a session event from the user.
func sessionEvent(f *Factory, id string, t schemas.Type, p any) (*schemas.Envelope, error) {
	env, err := schemas.New(t, id, "user", "", f.Now(), p)
	if err != nil {
		return nil, err
	}
	env.Priority = schemas.PriorityUserInteractive
	return env, nil
}

// focusedActive returns the focused session if it is active, else "".
func focusedActive(ctx context.Context, r *stateReader) (string, error) {
	ss, err := r.Sessions(ctx, projections.SessionFilter{State: projections.StateActive})
	if err != nil {
		return "", err
	}
	for _, s := range ss {
		if s.Focused {
			return s.ID, nil
		}
	}
	return "", nil
}

func sessionNewRun(ctx context.Context, f *Factory, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	id := opts.ID
	if id == "" {
		id = newSessionID()
	}
	if s, err := r.Session(ctx, id); err == nil {
		return fmt.Errorf("session %s already exists (%s)", id, s.State)
	} else if !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	create, err := sessionEvent(f, id, schemas.TypeSessionCreate, schemas.SessionCreate{Name: opts.Name})
	if err != nil {
		return err
	}
	envs := []*schemas.Envelope{create}
	if !opts.NoSwitch {
		from, err := focusedActive(ctx, r)
		if err != nil {
			return err
		}
		sw, err := sessionEvent(f, id, schemas.TypeSessionSwitch, schemas.SessionSwitch{From: from})
		if err != nil {
			return err
		}
		envs = append(envs, sw)
	}
	seqs, err := r.log.AppendBatch(ctx, envs)
	if err != nil {
		return err
	}
	s, err := settle(ctx, r, id, seqs...)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.printJSON(s)
	}
	fmt.Fprintf(f.IO.Out, "session %s %s", s.ID, s.State)
	if s.Name != "" {
		fmt.Fprintf(f.IO.Out, " (%s)", s.Name)
	}
	fmt.Fprintln(f.IO.Out)
	return nil
}

// settle waits until the projections have applied seqs, fails if they
// refused any of them, and returns the session as it now is.
func settle(ctx context.Context, r *stateReader, id string, seqs ...uint64) (*projections.Session, error) {
	if err := r.Sync(ctx, seqs[len(seqs)-1]); err != nil {
		return nil, err
	}
	for _, seq := range seqs {
		rej, err := r.Rejected(ctx, seq)
		if err != nil {
			return nil, err
		}
		if rej != nil {
			return nil, fmt.Errorf("the %s event (seq %d) was refused: %s", rej.Type, seq, rej.Reason)
		}
	}
	return r.Session(ctx, id)
}

func newSessionListCmd(f *Factory) *cobra.Command {
	opts := &SessionOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sessions (the focused one marked *)",
		Example: `  sylk session list
  sylk session list --state active
  sylk session list --json | jq -r .id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.State != "" && !validState(opts.State) {
				return usagef("--state %q: use one of %s", opts.State, statesList())
			}
			return sessionListRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.State, "state", "", "only sessions in this state ("+statesList()+")")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per session")
	return cmd
}

func validState(s string) bool {
	for _, st := range projections.SessionStates {
		if string(st) == s {
			return true
		}
	}
	return false
}

func statesList() string {
	var out []string
	for _, st := range projections.SessionStates {
		out = append(out, string(st))
	}
	return strings.Join(out, ", ")
}

func sessionListRun(ctx context.Context, f *Factory, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	ss, err := r.Sessions(ctx, projections.SessionFilter{State: projections.SessionState(opts.State)})
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, s := range ss {
			if err := f.IO.printJSON(s); err != nil {
				return err
			}
		}
		return nil
	}
	if len(ss) == 0 {
		if opts.State != "" {
			fmt.Fprintf(f.IO.ErrOut, "no %s sessions\n", opts.State)
		} else {
			fmt.Fprintln(f.IO.ErrOut, "no sessions yet: sylk session new NAME creates one")
		}
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSTATE\tNAME\tACTIVE DAG\tDAGS\tLAST ACTIVE")
	for _, s := range ss {
		mark := " "
		if s.Focused {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%d\t%s\n", mark, s.ID, stateWithPause(s), orDash(s.Name), orDash(s.ActiveDAG), len(s.DAGHistory), s.LastActiveAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func stateWithPause(s *projections.Session) string {
	if s.Paused {
		return string(s.State) + " (paused)"
	}
	return string(s.State)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newSessionShowCmd(f *Factory) *cobra.Command {
	opts := &SessionOptions{}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a session: state, history, context, DAGs and what waits on you",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return sessionShowRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the session as JSON")
	return cmd
}

// sessionNotFound words the error for an unknown session id.
func sessionNotFound(id string, err error) error {
	if errors.Is(err, projections.ErrNotFound) {
		return fmt.Errorf("%w ('sylk session list' shows the sessions)", err)
	}
	return err
}

func sessionShowRun(ctx context.Context, f *Factory, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := r.Session(ctx, opts.ID)
	if err != nil {
		return sessionNotFound(opts.ID, err)
	}
	if opts.JSON {
		return f.IO.printJSON(s)
	}
	dags, err := r.DAGs(ctx, projections.DAGFilter{Session: s.ID})
	if err != nil {
		return err
	}
	pending, err := r.Pending(ctx, s.ID)
	if err != nil {
		return err
	}
	printSession(f.IO.Out, s, dags, pending)
	return nil
}

func printSession(w io.Writer, s *projections.Session, dags []*projections.DAG, pending []*projections.PendingRequest) {
	focus := ""
	if s.Focused {
		focus = ", focused"
	}
	fmt.Fprintf(w, "session %s: %s%s\n", s.ID, stateWithPause(s), focus)
	if s.Name != "" {
		fmt.Fprintf(w, "  name:      %s\n", s.Name)
	}
	fmt.Fprintf(w, "  created:   %s (seq %d)\n", s.CreatedAt.Local().Format(time.DateTime), s.CreatedSeq)
	for _, t := range []struct {
		label string
		at    *time.Time
	}{{"activated", s.ActivatedAt}, {"suspended", s.SuspendedAt}, {"completed", s.CompletedAt}, {"failed", s.FailedAt}} {
		if t.at != nil {
			fmt.Fprintf(w, "  %-10s %s\n", t.label+":", t.at.Local().Format(time.DateTime))
		}
	}
	if s.LastSeq > 0 {
		fmt.Fprintf(w, "  last event: seq %d at %s\n", s.LastSeq, s.LastActiveAt.Local().Format(time.DateTime))
	}
	if s.Summary != "" {
		fmt.Fprintf(w, "  summary:   %s\n", s.Summary)
	}
	if s.FailReason != "" {
		fmt.Fprintf(w, "  failed:    %s\n", s.FailReason)
	}
	if moves := projections.Allowed(s.State); len(moves) > 0 {
		var m []string
		for _, x := range moves {
			m = append(m, string(x))
		}
		fmt.Fprintf(w, "  can:       %s\n", strings.Join(m, ", "))
	}
	c := s.Context
	for _, l := range []struct{ label, v string }{
		{"task", c.CurrentTask}, {"step", c.CurrentStep}, {"objective", c.CurrentObjective},
		{"done", strings.Join(c.CompletedSteps, "; ")}, {"next", strings.Join(c.NextSteps, "; ")},
		{"blockers", strings.Join(c.Blockers, "; ")}, {"modified", strings.Join(c.ModifiedFiles, " ")},
	} {
		if l.v != "" {
			fmt.Fprintf(w, "  %-10s %s\n", l.label+":", l.v)
		}
	}
	fmt.Fprintln(w, "  history:")
	for _, t := range s.Transitions {
		from := string(t.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(w, "    seq %-6d %s  %s → %s (%s)\n", t.Seq, t.At.Local().Format(time.DateTime), from, t.To, t.Event)
	}
	if len(dags) > 0 {
		fmt.Fprintln(w, "  dags:")
		for _, d := range dags {
			fmt.Fprintf(w, "    %s %s: %s\n", d.ID, orDash(d.Name), dagProgress(d))
		}
	}
	if len(pending) > 0 {
		fmt.Fprintln(w, "  waiting on you:")
		for _, p := range pending {
			what := p.Question
			if p.Kind == projections.KindPlan {
				what = "approve plan " + p.PlanID
			}
			fmt.Fprintf(w, "    %s from %s (%s): %s\n", p.Kind, p.Asker, p.Correlation, truncateRunes(what, 100))
		}
	}
}

// sessionMoves are the commands that move a session's state.
var sessionMoves = map[projections.Move]struct {
	short string
	typ   schemas.Type
}{
	projections.MoveSwitch:   {"Focus a session and suspend the focused one", schemas.TypeSessionSwitch},
	projections.MoveSuspend:  {"Suspend an active session", schemas.TypeSessionSuspend},
	projections.MoveResume:   {"Resume a suspended session (or activate a created one)", schemas.TypeSessionResume},
	projections.MoveComplete: {"Complete an active or suspended session", schemas.TypeSessionComplete},
}

func newSessionMoveCmd(f *Factory, move projections.Move) *cobra.Command {
	opts := &SessionOptions{}
	m := sessionMoves[move]
	cmd := &cobra.Command{
		Use:   string(move) + " ID",
		Short: m.short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return sessionMoveRun(cmd.Context(), f, move, opts)
		},
	}
	if move == projections.MoveComplete {
		cmd.Flags().StringVar(&opts.Summary, "summary", "", "what the session achieved, for the record")
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the session as JSON")
	return cmd
}

func sessionMoveRun(ctx context.Context, f *Factory, move projections.Move, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := r.Session(ctx, opts.ID)
	if err != nil {
		return sessionNotFound(opts.ID, err)
	}
	if _, err := projections.Next(s.ID, s.State, move); err != nil {
		return err
	}
	var p any
	var from string
	switch move {
	case projections.MoveSwitch:
		if from, err = focusedActive(ctx, r); err != nil {
			return err
		}
		if from == s.ID {
			from = ""
		}
		p = schemas.SessionSwitch{From: from}
	case projections.MoveSuspend:
		p = schemas.SessionSuspend{}
	case projections.MoveResume:
		p = schemas.SessionResume{}
	case projections.MoveComplete:
		p = schemas.SessionComplete{Summary: opts.Summary}
	}
	env, err := sessionEvent(f, s.ID, sessionMoves[move].typ, p)
	if err != nil {
		return err
	}
	seq, err := r.log.Append(ctx, env)
	if err != nil {
		return err
	}
	s, err = settle(ctx, r, s.ID, seq)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.printJSON(s)
	}
	fmt.Fprintf(f.IO.Out, "session %s %s", s.ID, s.State)
	if from != "" {
		fmt.Fprintf(f.IO.Out, " (suspended %s)", from)
	}
	fmt.Fprintln(f.IO.Out)
	return nil
}
