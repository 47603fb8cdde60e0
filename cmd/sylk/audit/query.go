package audit

import (
	"context"
	"encoding/csv"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// QueryOptions are the flags of `sylk audit query`.
type QueryOptions struct {
	Category string
	Session  string
	Agent    string
	Outcome  string
	Since    string
	Until    string
	Limit    int
	JSON     bool
	CSV      bool
}

func newQueryCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &QueryOptions{}
	cmd := &cobra.Command{
		Use:   "query [--category C] [--session S] [--agent A] [--outcome O] [--since T] [--json|--csv]",
		Short: "List audit entries: who did what to what, and how it ended",
		Long: `List the audit log in the order the stream stored it, oldest first: the newest
(last stored) --limit entries the filters select. --since and --until select by
each event's own time, which clocks out of step may put out of that order.

Categories:
  permission  permission requests and decisions, denied tool calls, hooks that
              blocked, refused prompts (secrets), forged senders dead-lettered
  file        file tool calls; file writes with their size and SHA-256
  process     commands run (exit code, duration); processes killed
  llm         model calls (model, tokens, cost) and failed ones
  session     sessions started, suspended, resumed, forked, completed, failed;
              workflows started and finished; failed tasks; pipeline stages;
              agent restarts; messages given up on; pause, resume, cancel
  config      credentials issued and revoked, schedules changed

Outcomes: allowed, denied, error, asked (a permission request waiting for its
answer). --since and --until take an RFC 3339 time, a date (2026-11-21) or a
duration ago (2h).

Each entry is an event of the log read as an audit line; the tamper evidence
of those events is 'sylk audit verify'.`,
		Example: `  sylk audit query --outcome denied --since 24h
  sylk audit query --category file --session S1
  sylk audit query --agent engineer --category process --json | jq -r .target
  sylk audit query --category permission --csv > permissions.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return queryRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Category, "category", "", "only this category: "+strings.Join(schemas.AuditCategories, ", "))
	fl.StringVar(&opts.Session, "session", "", "only this session (_ is the system session)")
	fl.StringVar(&opts.Agent, "agent", "", "only what this agent (or user) did")
	fl.StringVar(&opts.Outcome, "outcome", "", "only this outcome: "+strings.Join(schemas.AuditOutcomes, ", "))
	fl.StringVar(&opts.Since, "since", "", "only entries at or after this time (RFC 3339, a date, or a duration ago)")
	fl.StringVar(&opts.Until, "until", "", "only entries before this time")
	fl.IntVar(&opts.Limit, "limit", projections.DefaultAuditLimit, "the newest N entries")
	fl.BoolVar(&opts.JSON, "json", false, "one JSON object per entry")
	fl.BoolVar(&opts.CSV, "csv", false, "CSV with a header line")
	return cmd
}

// query turns the flags into a query, checked before anything is opened.
func (o *QueryOptions) query(now time.Time) (projections.AuditQuery, error) {
	q := projections.AuditQuery{Category: o.Category, Session: o.Session, Agent: o.Agent, Outcome: o.Outcome, Limit: o.Limit}
	if o.JSON && o.CSV {
		return q, cmdutil.Usagef("--json and --csv: choose one")
	}
	if o.Limit < 1 {
		return q, cmdutil.Usagef("--limit %d: at least 1", o.Limit)
	}
	var err error
	if q.Since, err = cmdutil.ParseTime("--since", o.Since, now); err != nil {
		return q, err
	}
	if q.Until, err = cmdutil.ParseTime("--until", o.Until, now); err != nil {
		return q, err
	}
	if err := q.Validate(); err != nil {
		return q, cmdutil.UsageError{Err: err}
	}
	return q, nil
}

func queryRun(ctx context.Context, f *cmdutil.Factory, opts *QueryOptions) error {
	q, err := opts.query(f.Now())
	if err != nil {
		return err
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	es, err := r.Audit(ctx, q)
	if err != nil {
		return err
	}
	switch {
	case opts.JSON:
		for _, e := range es {
			if err := f.IO.PrintJSON(e); err != nil {
				return err
			}
		}
		return nil
	case opts.CSV:
		return writeCSV(f, es)
	}
	if len(es) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no audit entries match")
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tSESSION\tCATEGORY\tAGENT\tACTION\tTARGET\tOUTCOME\tREASON / DETAILS")
	for _, e := range es {
		more := details(e)
		if e.Reason != "" {
			more = strings.TrimSpace(e.Reason + "  " + more)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.Local().Format("2006-01-02 15:04:05"), e.Session,
			e.Category, e.Agent, e.Action, orDash(cut(e.Target, 60)), e.Outcome, cut(more, 120))
	}
	return tw.Flush()
}

func writeCSV(f *cmdutil.Factory, es []*projections.AuditEntry) error {
	w := csv.NewWriter(f.IO.Out)
	if err := w.Write([]string{"seq", "time", "session", "category", "agent", "type", "action", "target", "outcome", "reason", "details", "id"}); err != nil {
		return err
	}
	for _, e := range es {
		rec := []string{strconv.FormatUint(e.Seq, 10), e.At.UTC().Format(time.RFC3339Nano), e.Session, e.Category, e.Agent,
			string(e.Type), e.Action, e.Target, e.Outcome, e.Reason, details(e), e.ID}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// details is an entry's details as "key=value" pairs by key.
func details(e *projections.AuditEntry) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(e.Details)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, e.Details[k])
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to n runes for the table (--json and --csv keep all).
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
