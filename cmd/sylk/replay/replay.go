// Package replay is `sylk replay`: a session's events, or its state as of a
// point in its history.
package replay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// ReplayOptions are the flags of `sylk replay`.
type ReplayOptions struct {
	Session string
	Until   string
	JSON    bool
	State   bool
	// Re-execution (see reexec.go).
	Reexecute bool
	Live      bool
	All       bool
	Since     string
}

func NewCmdReplay(f *cmdutil.Factory) *cobra.Command {
	opts := &ReplayOptions{}
	cmd := &cobra.Command{
		Use:   "replay SESSION [--until SEQ|TIME] [--reexecute [--live]] | replay --reexecute --all [--since 7d]",
		Short: "Show a session's events or state as of a point, or re-execute it against today's agents",
		Long: `Print a session's events in stream order, one line each (as 'sylk tail' does),
or with --json one JSON object per event. The session log projection makes this
a range scan over the session's own events, however large the stream.

--until stops at a stream sequence (inclusive) or before the first event
stamped after an RFC 3339 time. --state prints the session, its DAGs, its
checkpoints and what waited on the user as of that point instead: the session's
events folded again, from its log. A fork's events are its parent's up to the
fork point (marked "from PARENT"), then its own.

--reexecute runs the session again against this build's agents and
configuration, in a runtime of its own in a scratch directory: the session's
inputs (what came from outside the agents: sessions, requests, plans, plan
decisions, answers, signals) are fed in order, every tool and LLM call is
answered from the recording (no process runs, no request leaves), and every
event the agents produce is compared with the recorded one in the same
position (type, source, target, payload; not ids, times or durations). It
prints "identical: N events, 0 calls made", or the first divergence: the input
it follows from, the recorded and the new event, the fields that differ, and
for an LLM call what in the request changed. A call the recording lacks is a
divergence; with --live it is made for real and the run goes on as a what-if,
kept as a fork of the session: its history up to the last event before the
divergence, then the what-if's own events (sylk session show FORK, sylk replay
FORK; no agent handles them again, what you do in the fork runs for real).
Signals to every session sent while it was recorded are fed at their places.
Exit 0 identical, 1 diverged, 2 an error (an unknown session, --until past its
end, a session without inputs) or a session still running: it is re-executed
as far as it is recorded, calls the recording has no answer for yet are listed
as pending (only the compared events say if the run diverged), and a check of part of a session does not pass (run it again
when the session has ended). --all re-executes every session (active in the
last --since) and prints a table: check a new build, routing, prompts or model
against recorded work before deploying it; it exits 1 if any session
diverged, else 2 if any could not be re-executed or is still running (the
table says which).`,
		Example: `  sylk replay S1
  sylk replay S1 --until 120 --state
  sylk replay S1 --until 2026-11-21T09:30:00Z --json | jq -r .envelope.type
  sylk replay S1 --reexecute
  sylk replay S1 --reexecute --until 200 --json | jq .divergence.fields
  sylk replay S1 --reexecute --live --json | jq -r .what_if.session
  sylk replay --reexecute --all --since 7d`,
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.All {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.All || opts.Live || cmd.Flags().Changed("since") {
				if !opts.Reexecute {
					return cmdutil.Usagef("--all, --live and --since go with --reexecute")
				}
			}
			if opts.Reexecute && opts.State {
				return cmdutil.Usagef("--state shows recorded state; it does not go with --reexecute")
			}
			if opts.All {
				return reexecuteAll(cmd.Context(), f, opts)
			}
			opts.Session = args[0]
			if err := schemas.CheckName("session", opts.Session); err != nil && opts.Session != schemas.SystemSession {
				return cmdutil.UsageError{Err: err}
			}
			if opts.Reexecute {
				return reexecuteRun(cmd.Context(), f, opts)
			}
			return replayRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Until, "until", "", "stop at this stream sequence, or at this RFC 3339 time")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "JSON: one object per event, or the state as one object")
	cmd.Flags().BoolVar(&opts.State, "state", false, "print the session's state as of --until instead of its events")
	cmd.Flags().BoolVar(&opts.Reexecute, "reexecute", false, "run the session again against today's agents, calls answered from the recording")
	cmd.Flags().BoolVar(&opts.Live, "live", false, "with --reexecute: make the calls the recording lacks for real, and keep the what-if as a fork")
	cmd.Flags().BoolVar(&opts.All, "all", false, "with --reexecute: every session, as a table")
	cmd.Flags().StringVar(&opts.Since, "since", "", "with --all: only sessions active in this long (7d, 12h)")
	return cmd
}

func parseUntil(s string) (projections.AsOf, error) {
	if s == "" {
		return projections.AsOf{}, nil
	}
	if seq, err := strconv.ParseUint(s, 10, 64); err == nil && seq > 0 {
		return projections.AsOf{Seq: seq}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return projections.AsOf{Time: t}, nil
	}
	return projections.AsOf{}, cmdutil.Usagef("--until %q: want a stream sequence (120) or an RFC 3339 time (2026-11-21T09:30:00Z)", s)
}

func replayRun(ctx context.Context, f *cmdutil.Factory, opts *ReplayOptions) error {
	until, err := parseUntil(opts.Until)
	if err != nil {
		return err
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if opts.State {
		return replayState(ctx, f, r, opts.Session, until, opts.JSON)
	}
	q := projections.LogQuery{Session: opts.Session, Until: until.Seq, UntilTime: until.Time}
	n, from := 0, ""
	for {
		page, err := r.SessionLog(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if !opts.JSON && e.From != from {
				if e.From != "" {
					fmt.Fprintf(f.IO.Out, "── from %s's history\n", e.From)
				} else {
					fmt.Fprintf(f.IO.Out, "── %s's own events\n", opts.Session)
				}
				from = e.From
			}
			ev := &events.Event{Seq: e.Seq, Data: e.Data}
			ev.Env, ev.Err = schemas.Unmarshal(e.Data)
			if ev.Env != nil {
				ev.Subject = events.Subject(ev.Env)
			}
			if err := render.PrintEvent(f.IO, ev, opts.JSON); err != nil {
				return err
			}
			n++
		}
		if !page.More {
			break
		}
		q.From = page.Next
	}
	// Bytes the projections could not file as an event of this build's
	// schema (another version's) are not in the log: say where they are.
	rejected, err := r.Rejections(ctx, projections.RejectionFilter{Projection: projections.Log, Session: opts.Session})
	if err != nil {
		return err
	}
	for _, x := range rejected {
		if until.Seq == 0 || x.Seq <= until.Seq {
			fmt.Fprintf(f.IO.ErrOut, "seq %d of session %s does not decode (another schema version?), not shown: %s\n", x.Seq, opts.Session, x.Reason)
			n++
		}
	}
	if n == 0 {
		if _, err := r.Session(ctx, opts.Session); err != nil {
			return cmdutil.SessionNotFound(opts.Session, err)
		}
		fmt.Fprintf(f.IO.ErrOut, "no events of session %s up to %s\n", opts.Session, opts.Until)
	}
	return nil
}

func replayState(ctx context.Context, f *cmdutil.Factory, r *cmdutil.StateReader, session string, until projections.AsOf, asJSON bool) error {
	v, err := r.SessionAsOf(ctx, session, until)
	if err != nil {
		return cmdutil.SessionNotFound(session, err)
	}
	if asJSON {
		return f.IO.PrintJSON(v)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "as of seq %d:\n", v.AsOf)
	switch {
	case v.Session == nil:
		fmt.Fprintf(w, "session %s was not created yet\n", session)
	case v.Session.ID != session:
		// A fork's history before its session_fork is its ancestor's.
		fmt.Fprintf(w, "session %s was not forked yet: its history up to here is %s's, as follows\n", session, v.Session.ID)
		render.PrintSession(w, v.Session, v.DAGs, v.Pending)
	default:
		render.PrintSession(w, v.Session, v.DAGs, v.Pending)
	}
	for _, d := range v.DAGs {
		fmt.Fprintln(w)
		render.PrintDAG(w, d)
	}
	if len(v.Checkpoints) > 0 {
		fmt.Fprintln(w, "\ncheckpoints:")
		for _, c := range v.Checkpoints {
			fmt.Fprintf(w, "  seq %d  dag %s layer %d  succeeded %s\n", c.Seq, c.DAG, c.Layer, render.ListOrDash(c.Succeeded))
		}
	}
	return nil
}
