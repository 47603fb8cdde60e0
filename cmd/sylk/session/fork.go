package session

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// ForkOptions are the flags of `sylk session fork`.
type ForkOptions struct {
	Parent     string
	At         uint64
	AtEvent    string
	BeforeType string
	ID         string
	Name       string
	JSON       bool
}

func newSessionForkCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &ForkOptions{}
	cmd := &cobra.Command{
		Use:   "fork SESSION [--at SEQ | --at-event ID | --before-type TYPE]",
		Short: "Start a new session from another's history at any event",
		Long: `Fork a session: a new session whose history is SESSION's up to a point, and
whose own events follow. One session_fork event records it (the parent and the
sequence); nothing of the parent is copied, so forking costs the same however
long the parent is. The fork starts from the parent's state at that point: a
DAG running then goes on in the fork (its nodes not finished by then are
dispatched again there), a plan waiting for approval waits in the fork, to be
answered differently (sylk plan approve|modify|reject --session FORK). Nothing
done in the fork changes the parent, and the reverse.

The point is the end of SESSION, or --at a stream sequence of its history, or
--at-event the event with that id, or --before-type the event just before the
last event of that type (fork before the plan was approved:
--before-type plan_approved). A fork of a fork works; a fork of that is
refused. 'sylk replay FORK' shows the shared history, then the fork's own.`,
		Example: `  sylk session fork s-1a2b3c4d
  sylk session fork s-1a2b3c4d --before-type plan_approved --name "reject instead"
  sylk session fork s-1a2b3c4d --at 120 --json | jq -r .id`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Parent = args[0]
			if err := schemas.CheckName("session", opts.Parent); err != nil {
				return cmdutil.UsageError{Err: err}
			}
			n := 0
			for _, set := range []bool{opts.At != 0, opts.AtEvent != "", opts.BeforeType != ""} {
				if set {
					n++
				}
			}
			if n > 1 {
				return cmdutil.Usagef("give one of --at, --at-event and --before-type")
			}
			if opts.BeforeType != "" && !schemas.Type(opts.BeforeType).Known() {
				return cmdutil.Usagef("--before-type %q is not a message type (sylk schema lists them)", opts.BeforeType)
			}
			if opts.ID != "" {
				if err := schemas.CheckName("--id", opts.ID); err != nil {
					return cmdutil.UsageError{Err: err}
				}
			}
			return forkRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().Uint64Var(&opts.At, "at", 0, "fork after this stream sequence of the session's history")
	cmd.Flags().StringVar(&opts.AtEvent, "at-event", "", "fork after the event with this id")
	cmd.Flags().StringVar(&opts.BeforeType, "before-type", "", "fork just before the last event of this type")
	cmd.Flags().StringVar(&opts.ID, "id", "", "the fork's session id (default: a new s-xxxxxxxx)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "the fork's name (default: the parent's)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the fork as JSON")
	return cmd
}

func forkRun(ctx context.Context, f *cmdutil.Factory, opts *ForkOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	parent, err := r.Session(ctx, opts.Parent)
	if err != nil {
		return cmdutil.UsageError{Err: cmdutil.SessionNotFound(opts.Parent, err)}
	}
	if err := checkDepth(ctx, r, parent); err != nil {
		return err
	}
	at, err := forkPoint(ctx, r, opts)
	if err != nil {
		return err
	}
	id := opts.ID
	if id == "" {
		id = conversation.NewSessionID()
	}
	env, err := schemas.New(schemas.TypeSessionFork, id, "user", "orchestrator", f.Now(), schemas.SessionFork{Parent: opts.Parent, ParentSeq: at, Name: opts.Name})
	if err != nil {
		return err
	}
	env.Priority = schemas.PriorityUserInteractive
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return err
	}
	s, err := settle(ctx, r, id, seq)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(s)
	}
	fmt.Fprintf(f.IO.Out, "session %s: a fork of %s at seq %d (%s)\n", s.ID, opts.Parent, at, s.State)
	if s.ActiveDAG != "" {
		fmt.Fprintf(f.IO.Out, "DAG %s goes on in the fork: sylk dag show %s --session %s\n", s.ActiveDAG, s.ActiveDAG, s.ID)
	}
	return nil
}

// checkDepth refuses a fork of a fork's fork before anything is appended.
func checkDepth(ctx context.Context, r *cmdutil.StateReader, s *projections.Session) error {
	depth := 0
	for cur := s; cur.Fork != nil; depth++ {
		next, err := r.Session(ctx, cur.Fork.Parent)
		if err != nil {
			return err
		}
		cur = next
	}
	if depth >= projections.MaxForkDepth {
		return cmdutil.Usagef("session %s is a fork of a fork: forks nest %d deep at most; fork one of its ancestors instead", s.ID, projections.MaxForkDepth)
	}
	return nil
}

// forkPoint finds the sequence the options name in the session's history.
func forkPoint(ctx context.Context, r *cmdutil.StateReader, opts *ForkOptions) (uint64, error) {
	var last, found, prev uint64
	q := projections.LogQuery{Session: opts.Parent}
	for {
		page, err := r.SessionLog(ctx, q)
		if err != nil {
			return 0, err
		}
		for _, e := range page.Entries {
			if opts.AtEvent != "" || opts.BeforeType != "" {
				env, err := schemas.Unmarshal(e.Data)
				switch {
				case err != nil:
				case opts.AtEvent != "" && env.ID == opts.AtEvent:
					found = e.Seq
				case opts.BeforeType != "" && string(env.Type) == opts.BeforeType:
					found = prev
				}
			}
			prev, last = e.Seq, e.Seq
		}
		if !page.More {
			break
		}
		q.From = page.Next
	}
	switch {
	case last == 0:
		return 0, cmdutil.Usagef("session %s has no events to fork", opts.Parent)
	case opts.At > last:
		return 0, cmdutil.Usagef("--at %d is past the end of session %s (its last event is seq %d)", opts.At, opts.Parent, last)
	case opts.At != 0:
		return opts.At, nil
	case opts.AtEvent != "" && found == 0:
		return 0, cmdutil.Usagef("--at-event %s: no event with that id in session %s (sylk replay %s lists them)", opts.AtEvent, opts.Parent, opts.Parent)
	case opts.BeforeType != "" && found == 0:
		return 0, cmdutil.Usagef("--before-type %s: session %s has no %s event with one before it", opts.BeforeType, opts.Parent, opts.BeforeType)
	case found != 0:
		return found, nil
	}
	return last, nil
}
