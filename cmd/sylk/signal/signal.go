// Package signal is `sylk signal`: pause, resume or cancel a session's work, or
// everything.
package signal

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// SignalOptions are the flags of `sylk signal`.
type SignalOptions struct {
	Action  string
	Session string
	Reason  string
	JSON    bool
}

func NewCmdSignal(f *cmdutil.Factory) *cobra.Command {
	opts := &SignalOptions{}
	cmd := &cobra.Command{
		Use:   "signal pause|resume|cancel [--session S]",
		Short: "Pause, resume or cancel a session's work, or everything",
		Long: `Signals are events too. A paused session's messages are held by the agents, not
lost, and handled on resume (a pause survives a server restart). Cancel stops the
session's running tools, skips its queued work and ends its running workflows;
work submitted after the cancel runs normally. Without --session the signal
covers every session.`,
		Example: `  sylk signal pause --session S1
  sylk signal resume --session S1
  sylk signal cancel --session S1 --reason "wrong branch"
  sylk signal pause                 # everything`,
		ValidArgs: []string{schemas.SignalPause, schemas.SignalResume, schemas.SignalCancel},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Action = args[0]
			return signalRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "the session (default: all sessions)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why, for the record")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the appended event as JSON")
	return cmd
}

func signalRun(ctx context.Context, f *cmdutil.Factory, opts *SignalOptions) error {
	session, scope := opts.Session, schemas.ScopeSession
	if session == "" {
		session, scope = schemas.SystemSession, schemas.ScopeAll
	}
	env, err := schemas.New(schemas.TypeSignal, session, "user", "orchestrator", f.Now(), schemas.Signal{Action: opts.Action, Scope: scope, Reason: opts.Reason})
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	log, err := f.Log(ctx)
	if err != nil {
		return err
	}
	seq, err := log.Append(ctx, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "id": env.ID, "subject": events.Subject(env), "action": opts.Action, "scope": scope, "session": opts.Session})
	}
	what := "every session"
	if scope == schemas.ScopeSession {
		what = "session " + opts.Session
	}
	fmt.Fprintf(f.IO.Out, "%s %s (seq %d)\n", opts.Action, what, seq)
	return nil
}
