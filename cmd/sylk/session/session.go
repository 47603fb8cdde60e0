// Package session is `sylk session`: create, list, show and move sessions.
package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
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

func NewCmdSession(f *cmdutil.Factory) *cobra.Command {
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
		newSessionMoveCmd(f, projections.MoveResume), newSessionMoveCmd(f, projections.MoveComplete),
		newSessionForkCmd(f), newSessionDiffCmd(f))
	return cmd
}

func newSessionNewCmd(f *cmdutil.Factory) *cobra.Command {
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
					return cmdutil.UsageError{Err: err}
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

// sessionEvent builds a session event from the user.
func sessionEvent(f *cmdutil.Factory, id string, t schemas.Type, p any) (*schemas.Envelope, error) {
	env, err := schemas.New(t, id, "user", "", f.Now(), p)
	if err != nil {
		return nil, err
	}
	env.Priority = schemas.PriorityUserInteractive
	return env, nil
}

// focusedActive returns the focused session if it is active, else "".
func focusedActive(ctx context.Context, r *cmdutil.StateReader) (string, error) {
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

func sessionNewRun(ctx context.Context, f *cmdutil.Factory, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	id := opts.ID
	if id == "" {
		id = conversation.NewSessionID()
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
	seqs, err := r.Log.AppendBatch(ctx, envs)
	if err != nil {
		return err
	}
	s, err := settle(ctx, r, id, seqs...)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(s)
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
func settle(ctx context.Context, r *cmdutil.StateReader, id string, seqs ...uint64) (*projections.Session, error) {
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

func newSessionListCmd(f *cmdutil.Factory) *cobra.Command {
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
				return cmdutil.Usagef("--state %q: use one of %s", opts.State, statesList())
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

func sessionListRun(ctx context.Context, f *cmdutil.Factory, opts *SessionOptions) error {
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
			if err := f.IO.PrintJSON(s); err != nil {
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
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%d\t%s\n", mark, s.ID, render.StateWithPause(s), render.OrDash(s.Name), render.OrDash(s.ActiveDAG), len(s.DAGHistory), s.LastActiveAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func newSessionShowCmd(f *cmdutil.Factory) *cobra.Command {
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

func sessionShowRun(ctx context.Context, f *cmdutil.Factory, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := r.Session(ctx, opts.ID)
	if err != nil {
		return cmdutil.SessionNotFound(opts.ID, err)
	}
	if opts.JSON {
		return f.IO.PrintJSON(s)
	}
	dags, err := r.DAGs(ctx, projections.DAGFilter{Session: s.ID})
	if err != nil {
		return err
	}
	pending, err := r.Pending(ctx, s.ID)
	if err != nil {
		return err
	}
	render.PrintSession(f.IO.Out, s, dags, pending)
	return nil
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

func newSessionMoveCmd(f *cmdutil.Factory, move projections.Move) *cobra.Command {
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

func sessionMoveRun(ctx context.Context, f *cmdutil.Factory, move projections.Move, opts *SessionOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := r.Session(ctx, opts.ID)
	if err != nil {
		return cmdutil.SessionNotFound(opts.ID, err)
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
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return err
	}
	s, err = settle(ctx, r, s.ID, seq)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(s)
	}
	fmt.Fprintf(f.IO.Out, "session %s %s", s.ID, s.State)
	if from != "" {
		fmt.Fprintf(f.IO.Out, " (suspended %s)", from)
	}
	fmt.Fprintln(f.IO.Out)
	return nil
}
