// Package tail is `sylk tail`: the log's events as they come, or the LLM's
// tokens live.
package tail

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// TailOptions are the flags of `sylk tail`.
type TailOptions struct {
	Subject  string
	Filter   events.Filter
	Since    string
	NoFollow bool
	Count    int
	JSON     bool
	// Live shows the LLM's tokens as they stream instead of stored events.
	Live bool
}

func NewCmdTail(f *cmdutil.Factory, runF func(context.Context, *cmdutil.Factory, *TailOptions) error) *cobra.Command {
	opts := &TailOptions{}
	var typ string
	cmd := &cobra.Command{
		Use:   "tail [SUBJECT]",
		Short: "Show events as they are appended",
		Long: `Show events, one line each: stream sequence, time, session, source→target, type
and a short payload summary. Follows new events until Ctrl-C (exit 0).

SUBJECT filters by the subject scheme sylk.v1.<session>.<source>.<target>.<type>
("sylk.v1." may be left out; '*' matches one token, '>' the rest). The flags
--session, --source, --target and --type build the same filter.

Bytes on the stream that are not a valid envelope (from an outside client) are
shown marked INVALID with the reason; they never stop the tail.

--live shows, instead of the stored events, what the LLM writes as it streams:
each call's text under a header naming the agent and the call, tool calls as
they are formed, and how the call ended. These pieces are published on core
NATS (sylk.live.<session>.<correlation>) and never stored, so --live needs a
running 'sylk serve' and shows only what streams while it watches (the whole
answers are in the log as llm_response events). --count then counts calls
that ended; --since, --no-follow, SUBJECT and the filters other than --session
do not apply.`,
		Example: `  sylk tail                                 # everything from the start, then live
  sylk tail --session S1 --since new        # only what S1 does from now on
  sylk tail '*.*.engineer.*' --no-follow    # all the engineers' mail so far
  sylk tail --type task_dispatch --json | jq .envelope.payload.node_id
  sylk tail --live --session s-1a2b3c4d     # the model's tokens as they come
  sylk tail --live --json | jq -r .payload.text`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Filter.Type = schemas.Type(typ)
			if opts.Live {
				if err := checkLive(cmd, args, opts); err != nil {
					return err
				}
				if runF != nil {
					return runF(cmd.Context(), f, opts)
				}
				return tailLive(cmd.Context(), f, opts)
			}
			if len(args) == 1 {
				if opts.Filter != (events.Filter{}) {
					return cmdutil.Usagef("give a SUBJECT or the --session/--source/--target/--type flags, not both")
				}
				s, err := events.ParseSubject(args[0])
				if err != nil {
					return cmdutil.UsageError{Err: err}
				}
				opts.Subject = s
			} else {
				if err := opts.Filter.Validate(); err != nil {
					return cmdutil.UsageError{Err: err}
				}
				opts.Subject = opts.Filter.Subject()
			}
			if runF != nil {
				return runF(cmd.Context(), f, opts)
			}
			return tailRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Filter.Session, "session", "", "only this session")
	fl.StringVar(&opts.Filter.Source, "source", "", "only events from this sender")
	fl.StringVar(&opts.Filter.Target, "target", "", "only events addressed to this agent (guide: unaddressed)")
	fl.StringVar(&typ, "type", "", "only this message type")
	fl.StringVar(&opts.Since, "since", "all", "start at: all, new, a sequence number, an RFC 3339 time, or a duration ago (10m)")
	fl.BoolVar(&opts.NoFollow, "no-follow", false, "print the events so far and exit")
	fl.IntVar(&opts.Count, "count", 0, "exit after this many events (0: no limit)")
	fl.BoolVar(&opts.JSON, "json", false, "one JSON object per line (the envelope with its payload decoded)")
	fl.BoolVar(&opts.Live, "live", false, "show the LLM's tokens as they stream (not stored; needs 'sylk serve')")
	return cmd
}

func tailRun(ctx context.Context, f *cmdutil.Factory, opts *TailOptions) error {
	from, err := events.ParseCursor(opts.Since, f.Now())
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	log, err := f.Log(ctx)
	if err != nil {
		return err
	}
	printed := 0
	print := func(ev *events.Event) error {
		if err := render.PrintEvent(f.IO, ev, opts.JSON); err != nil {
			return err
		}
		if printed++; opts.Count > 0 && printed >= opts.Count {
			return errEnough
		}
		return nil
	}
	if opts.NoFollow {
		if err := log.Scan(ctx, opts.Subject, from, 0, print); !errors.Is(err, errEnough) {
			return err
		}
		return nil
	}
	tail, err := log.Tail(ctx, opts.Subject, from)
	if err != nil {
		return err
	}
	defer tail.Stop()
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil // Ctrl-C
			}
			return err
		}
		if err := print(ev); err != nil {
			if errors.Is(err, errEnough) {
				return nil
			}
			return err
		}
	}
}

// errEnough ends a tail that has printed --count events.
var errEnough = errors.New("enough events")
