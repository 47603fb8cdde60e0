package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/projections"
)

// reexecuteRun re-executes one session: exit 0 identical, 1 diverged, 2 an
// error or a session still running (identical as far as it is recorded: a
// check of part of the session does not pass).
func reexecuteRun(ctx context.Context, f *cmdutil.Factory, opts *ReplayOptions) error {
	var until uint64
	if opts.Until != "" {
		n, err := strconv.ParseUint(opts.Until, 10, 64)
		if err != nil || n == 0 {
			return cmdutil.Usagef("--until %q: with --reexecute, want a stream sequence (120)", opts.Until)
		}
		until = n
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := reexecute(ctx, f, r, opts.Session, until, opts.Live)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	if opts.JSON {
		if err := f.IO.PrintJSON(rep); err != nil {
			return err
		}
	} else {
		printReport(f.IO.Out, rep)
	}
	return exitOf(rep)
}

// exitOf is a report's exit status: 1 diverged, 2 identical as far as a
// session still running is recorded, 0 identical.
func exitOf(rep *reexec.Report) error {
	switch {
	case !rep.Identical:
		return cmdutil.ExitCodeError{Code: 1}
	case rep.Running:
		return cmdutil.ExitCodeError{Code: 2}
	}
	return nil
}

func reexecute(ctx context.Context, f *cmdutil.Factory, r *cmdutil.StateReader, session string, until uint64, live bool) (*reexec.Report, error) {
	rec, err := reexec.Load(ctx, r, session, until)
	if err != nil {
		return nil, err
	}
	b, err := f.Broker(ctx)
	if err != nil {
		return nil, err
	}
	if rec.Handled, err = reexec.HandledBy(ctx, b.JetStream()); err != nil {
		return nil, err
	}
	opts := reexec.Options{Runtime: f.RuntimeConfig(), Live: live}
	if live {
		opts.Keep, opts.KeepAs = r.Log, conversation.NewSessionID()
	}
	c, err := f.LLMConfig()
	switch {
	case err == nil:
		opts.LLM = &c
	case !errors.Is(err, llm.ErrNotConfigured):
		return nil, err
	}
	return reexec.Run(ctx, rec, opts)
}

func printReport(w io.Writer, rep *reexec.Report) {
	if rep.Running {
		fmt.Fprintf(w, "session %s is still running: re-executed what is recorded so far (exit 2 unless it diverged; run it again when it has ended)\n", rep.Session)
	}
	if rep.Prefix {
		fmt.Fprintf(w, "re-executed session %s up to --until\n", rep.Session)
	}
	for _, p := range rep.Undecodable {
		fmt.Fprintf(w, "seq %d does not decode (another schema version?), not re-executed: %s\n", p.Seq, p.Err)
	}
	if len(rep.CallsPending) > 0 {
		fmt.Fprintf(w, "calls the recorded run made but had no answer to where the recording stops (not compared): %s\n", strings.Join(rep.CallsPending, ", "))
	}
	if rep.Identical {
		fmt.Fprintf(w, "identical: %d events, %d calls made (%d answered from the recording, %d inputs)\n", rep.Events, rep.CallsMade, rep.CallsServed, rep.Inputs)
		return
	}
	d := rep.Divergence
	fmt.Fprintf(w, "diverged (%s): %s\n", d.Kind, d.Reason)
	fmt.Fprintf(w, "  %d of %d recorded events compared, %d calls made, %d answered from the recording\n", rep.Events, rep.Recorded, rep.CallsMade, rep.CallsServed)
	if d.Input != nil {
		fmt.Fprintf(w, "after input seq %d: %s %s→%s\n", d.Input.Seq, d.Input.Type, d.Input.Source, orDash(d.Input.Target))
	}
	if d.Recorded != nil || d.New != nil {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\trecorded\tnew")
		fmt.Fprintf(tw, "seq\t%s\t%s\n", seqOf(d.Recorded), seqOf(d.New))
		fmt.Fprintf(tw, "type\t%s\t%s\n", field(d.Recorded, func(e *reexec.Event) string { return string(e.Type) }), field(d.New, func(e *reexec.Event) string { return string(e.Type) }))
		fmt.Fprintf(tw, "route\t%s\t%s\n", field(d.Recorded, route), field(d.New, route))
		tw.Flush()
	}
	for _, fd := range d.Fields {
		fmt.Fprintf(w, "  %s: %v -> %v\n", fd.Path, valueText(fd.Recorded), valueText(fd.New))
	}
	if len(rep.CallsMissing) > 0 {
		fmt.Fprintf(w, "calls the recording lacks: %s\n", strings.Join(rep.CallsMissing, ", "))
	}
	if wi := rep.WhatIf; wi != nil {
		fmt.Fprintf(w, "the what-if is kept as session %s, a fork of %s after seq %d with %d events of its own:\n  sylk session show %s; sylk replay %s\n",
			wi.Session, wi.Parent, wi.ParentSeq, wi.Events, wi.Session, wi.Session)
	}
}

func seqOf(e *reexec.Event) string {
	if e == nil {
		return "(none)"
	}
	return strconv.FormatUint(e.Seq, 10)
}

func field(e *reexec.Event, get func(*reexec.Event) string) string {
	if e == nil {
		return "-"
	}
	return get(e)
}

func route(e *reexec.Event) string { return e.Source + "→" + orDash(e.Target) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func valueText(v any) string {
	if v == nil {
		return "(none)"
	}
	s := fmt.Sprintf("%v", v)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// reexecuteAll re-executes every session (active since --since) and prints a
// table: exit 0 if all were identical, 1 if any diverged, else 2 if any could
// not be re-executed or is still running (a check that did not run, or ran
// on part of a session, does not pass).
func reexecuteAll(ctx context.Context, f *cmdutil.Factory, opts *ReplayOptions) error {
	var since time.Time
	if opts.Since != "" {
		d, err := parseAgo(opts.Since)
		if err != nil {
			return err
		}
		since = f.Now().Add(-d)
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	sessions, err := r.Sessions(ctx, projections.SessionFilter{})
	if err != nil {
		return err
	}
	type row struct {
		Session string         `json:"session"`
		Report  *reexec.Report `json:"report,omitempty"`
		Error   string         `json:"error,omitempty"`
	}
	var rows []row
	diverged, failed := false, false // failed: an error, or a session still running
	for _, s := range sessions {
		if !since.IsZero() && s.LastActiveAt.Before(since) {
			continue
		}
		rep, err := reexecute(ctx, f, r, s.ID, 0, opts.Live)
		x := row{Session: s.ID, Report: rep}
		if err != nil {
			x.Error, failed = err.Error(), true
		} else {
			diverged = diverged || !rep.Identical
			failed = failed || rep.Running
		}
		rows = append(rows, x)
	}
	if opts.JSON {
		for _, x := range rows {
			if err := f.IO.PrintJSON(x); err != nil {
				return err
			}
		}
	} else {
		tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tRESULT\tEVENTS\tCALLS SERVED\tCALLS MADE\tFIRST DIVERGENCE")
		for _, x := range rows {
			switch {
			case x.Error != "":
				fmt.Fprintf(tw, "%s\terror\t-\t-\t-\t%s\n", x.Session, x.Error)
			case x.Report.Identical && x.Report.Running:
				fmt.Fprintf(tw, "%s\tidentical so far\t%d\t%d\t%d\tstill running: re-executed what is recorded\n", x.Session, x.Report.Events, x.Report.CallsServed, x.Report.CallsMade)
			case x.Report.Identical:
				fmt.Fprintf(tw, "%s\tidentical\t%d\t%d\t%d\t-\n", x.Session, x.Report.Events, x.Report.CallsServed, x.Report.CallsMade)
			default:
				fmt.Fprintf(tw, "%s\tdiverged\t%d/%d\t%d\t%d\t%s\n", x.Session, x.Report.Events, x.Report.Recorded, x.Report.CallsServed, x.Report.CallsMade, x.Report.Divergence.Reason)
			}
		}
		tw.Flush()
		if len(rows) == 0 {
			fmt.Fprintln(f.IO.ErrOut, "no sessions to re-execute")
		}
	}
	switch {
	case diverged:
		return cmdutil.ExitCodeError{Code: 1}
	case failed:
		return cmdutil.ExitCodeError{Code: 2}
	}
	return nil
}

// parseAgo reads a duration, in days too (7d).
func parseAgo(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, cmdutil.Usagef("--since %q: want a duration such as 7d or 12h", s)
}
