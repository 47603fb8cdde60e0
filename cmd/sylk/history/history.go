// Package history is `sylk history`: what the Archivalist recorded (outcomes,
// failures and decisions) across sessions.
package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/archivalist"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// HistoryOptions are the flags of `sylk history`.
type HistoryOptions struct {
	Sessions   []string
	Exclude    []string
	Categories []string
	Search     string
	Since      string
	Until      string
	Limit      int
	Detail     bool
	JSON       bool
	All        bool
}

func NewCmdHistory(f *cmdutil.Factory) *cobra.Command {
	opts := &HistoryOptions{}
	cmd := &cobra.Command{
		Use:   "history",
		Short: "What the Archivalist recorded: outcomes, failures and decisions, across sessions",
		Long: `List the history the Archivalist keeps: workflow outcomes, failed and stuck
nodes, rejected DAGs, plan decisions, messages given up on, and notes agents
asked it to store. Newest first.

Which sessions: those --session names; else the current (focused) session and
the entries promoted to project scope ('sylk history promote', marked
"promoted"); --all-sessions reads every session, as does a data directory with
no current session.

--search is full-text and ranked: every word must be in the summary, the detail
or a tag (any case; "logout" also finds TestLogout), the most relevant first.
--since and --until take an RFC 3339 time, a date (2026-11-21) or a duration
ago (2h).

'sylk history failures' is the failure memory: the same approach failing the
same way, counted across every session.`,
		Example: `  sylk history
  sylk history --all-sessions --category failure
  sylk history --search "logout timeout" --since 24h
  sylk history promote 0193a7c2-...   # every session sees it
  sylk history failures --min 2
  sylk history --json | jq -r .summary`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return historyRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.Sessions, "session", nil, "only these sessions (repeat or comma-separate)")
	cmd.Flags().BoolVar(&opts.All, "all-sessions", false, "every session, not only the current one and the promoted entries")
	cmd.Flags().StringSliceVar(&opts.Exclude, "exclude-session", nil, "leave out these sessions")
	cmd.Flags().StringSliceVar(&opts.Categories, "category", nil, "only these categories (outcome, failure, decision, note, ...)")
	cmd.Flags().StringVar(&opts.Search, "search", "", "full-text search: entries holding every word, the most relevant first")
	cmd.Flags().StringVar(&opts.Since, "since", "", "only entries at or after this time (RFC 3339, a date, or a duration ago)")
	cmd.Flags().StringVar(&opts.Until, "until", "", "only entries at or before this time")
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "the newest N entries")
	cmd.Flags().BoolVar(&opts.Detail, "detail", false, "print each entry's detail under it")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per entry")
	cmd.AddCommand(newPromoteCmd(f), newFailuresCmd(f))
	return cmd
}

// historyQuery turns the flags into a query; its contradictions are left to
// the query's own validation.
func historyQuery(opts *HistoryOptions, now time.Time) (projections.HistoryQuery, error) {
	q := projections.HistoryQuery{Sessions: opts.Sessions, ExcludeSessions: opts.Exclude, Categories: opts.Categories, Search: opts.Search, Limit: opts.Limit}
	if opts.Limit < 1 {
		return q, cmdutil.Usagef("--limit %d: at least 1", opts.Limit)
	}
	var err error
	if q.Since, err = cmdutil.ParseTime("--since", opts.Since, now); err != nil {
		return q, err
	}
	if q.Until, err = cmdutil.ParseTime("--until", opts.Until, now); err != nil {
		return q, err
	}
	if opts.All && len(opts.Sessions) > 0 {
		return q, cmdutil.Usagef("--all-sessions and --session: choose one")
	}
	if err := q.Validate(); err != nil {
		return q, cmdutil.UsageError{Err: err}
	}
	return q, nil
}

func historyRun(ctx context.Context, f *cmdutil.Factory, opts *HistoryOptions) error {
	q, err := historyQuery(opts, f.Now())
	if err != nil {
		return err
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if r.Client == nil {
		// With no server, what the agents have not recorded yet waits for them.
		n, err := unrecorded(ctx, f)
		if err != nil {
			return err
		}
		if n > 0 {
			what := fmt.Sprintf("%d events wait", n)
			if n == 1 {
				what = "1 event waits"
			}
			fmt.Fprintf(f.IO.ErrOut, "note: %s for the Archivalist, to be recorded when the agents next run (sylk serve, or sylk run)\n", what)
		}
	}
	if len(q.Sessions) == 0 && !opts.All {
		// The current session and the promoted entries, when there is one.
		ss, err := r.Sessions(ctx, projections.SessionFilter{})
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.Focused {
				q.Session = s.ID
			}
		}
	}
	hs, err := r.History(ctx, q)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, h := range hs {
			if err := f.IO.PrintJSON(h); err != nil {
				return err
			}
		}
		return nil
	}
	if len(hs) == 0 {
		if historyFiltered(opts) {
			fmt.Fprintln(f.IO.ErrOut, "no history entries match")
		} else {
			fmt.Fprintln(f.IO.ErrOut, "no history yet: the Archivalist records outcomes, failures and decisions as workflows run")
		}
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSESSION\tCATEGORY\tSUMMARY")
	for _, h := range hs {
		summary := h.Summary
		if h.Promoted {
			summary += "  (promoted)"
		}
		if len(h.Tags) > 0 {
			summary += "  [" + strings.Join(h.Tags, " ") + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.At.Local().Format(time.DateTime), sessionLabel(h.Session), h.Category, summary)
		if opts.Detail && h.Detail != "" {
			for _, l := range strings.Split(strings.TrimRight(h.Detail, "\n"), "\n") {
				fmt.Fprintf(tw, "\t\t\t    %s\n", l)
			}
		}
	}
	return tw.Flush()
}

// unrecorded is how many events the Archivalist's consumer has not handled:
// with no server running, the agents stopped with the last 'sylk run', maybe
// before recording its outcome.
func unrecorded(ctx context.Context, f *cmdutil.Factory) (uint64, error) {
	b, err := f.Broker(ctx)
	if err != nil {
		return 0, err
	}
	c, err := b.JetStream().Consumer(ctx, broker.Stream, agents.ConsumerName(archivalist.Name))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil // the agents never ran here
	}
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

func historyFiltered(o *HistoryOptions) bool {
	return len(o.Sessions) > 0 || len(o.Exclude) > 0 || o.All || len(o.Categories) > 0 || o.Search != "" || o.Since != "" || o.Until != ""
}

// sessionLabel names the system session for people.
func sessionLabel(s string) string {
	if s == schemas.SystemSession {
		return "(system)"
	}
	return s
}
