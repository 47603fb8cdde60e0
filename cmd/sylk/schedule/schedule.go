// Package schedule is `sylk schedule`: plans and requests that run on a
// schedule, fired by `sylk serve`.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	sched "github.com/sylk/sylk/agents/schedule"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// NewCmdSchedule is `sylk schedule` and its subcommands.
func NewCmdSchedule(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run plans and requests on a schedule (cron, every, at)",
		Long: `A schedule runs a plan file or a request when it is due: on a cron expression
(5 fields, 6 with seconds first, or @hourly, @daily ...), every fixed interval,
or once at a time; --tz gives the zone of --cron and --at (default UTC).

'sylk serve' fires schedules: each firing starts a session of its own. A plan
of tool nodes runs on the direct tier, with no LLM at all; a request goes to
the agents like 'sylk run "..."' (its plan waits for your approval). The plan
is checked when the schedule is added and again at each firing.

A due time fires once, whatever the number of servers. Runs missed while no
server ran collapse into one. Consecutive failures back off 1, 5, 15, then 60
minutes; the fifth disables the schedule with a notice, and a success resets
the count. 'sylk schedule resume' enables a disabled schedule again.`,
		Example: `  sylk schedule add nightly --cron "0 3 * * *" --tz Europe/Paris build.yaml
  sylk schedule add poll --every 15m check.yaml
  sylk schedule add standup --at "2026-12-01 09:00" --tz Europe/Paris "summarise yesterday's commits"
  sylk schedule ls
  sylk schedule show nightly --json
  sylk schedule pause nightly && sylk schedule resume nightly
  sylk schedule rm nightly`,
	}
	cmd.AddCommand(newCmdAdd(f), newCmdList(f), newCmdShow(f),
		newCmdControl(f, "pause", "Stop a schedule firing until resumed", schemas.TypeSchedulePause, projections.ScheduleActive),
		newCmdControl(f, "resume", "Enable a paused or disabled schedule again (its failure count starts at zero)", schemas.TypeScheduleResume, projections.SchedulePaused, projections.ScheduleDisabled),
		newCmdControl(f, "rm", "Remove a schedule (its past runs stay in the stream)", schemas.TypeScheduleRemove, projections.ScheduleActive, projections.SchedulePaused, projections.ScheduleDisabled),
	)
	return cmd
}

type addOptions struct {
	spec schemas.ScheduleSpec
	json bool
}

func newCmdAdd(f *cmdutil.Factory) *cobra.Command {
	o := &addOptions{}
	cmd := &cobra.Command{
		Use:   "add NAME (--cron EXPR | --every DURATION | --at TIME) [--tz ZONE] PLAN.yaml|\"REQUEST\"",
		Short: "Add a schedule: a plan file or a request, and when to run it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return add(cmd.Context(), f, o, args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&o.spec.Cron, "cron", "", `cron expression: "MIN HOUR DOM MON DOW", a leading seconds field, or @hourly/@daily/@weekly`)
	cmd.Flags().StringVar(&o.spec.Every, "every", "", "fixed interval, a Go duration (90s, 15m, 3h), counted from when the schedule is added")
	cmd.Flags().StringVar(&o.spec.At, "at", "", `one time: RFC 3339 or "2006-01-02 15:04" in --tz; fires once`)
	cmd.Flags().StringVar(&o.spec.TZ, "tz", "", "IANA time zone of --cron and --at (default UTC)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the schedule as JSON")
	return cmd
}

func add(ctx context.Context, f *cmdutil.Factory, o *addOptions, name, what string) error {
	if err := schemas.CheckName("schedule name", name); err != nil {
		return cmdutil.UsageError{Err: err}
	}
	c, err := sched.Compile(o.spec)
	if err == nil {
		err = c.CheckNew(f.Now())
	}
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	p := schemas.ScheduleAdd{Name: name, Spec: c.Spec, WorkDir: wd}
	if cmdutil.IsPlanPath(what) {
		_, src, err := f.LoadPlan(what)
		if err != nil {
			return err
		}
		p.Plan = string(src)
		if what != "-" {
			p.PlanFile, _ = filepath.Abs(what)
		}
	} else {
		p.Request = strings.TrimSpace(what)
		if p.Request == "" {
			return cmdutil.Usagef("the request is empty: give a plan file (.yaml) or a request in words")
		}
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if old, err := r.Schedule(ctx, name); err == nil && old.State != projections.ScheduleRemoved {
		return cmdutil.Usagef("schedule %q exists already (%s): remove it first (sylk schedule rm %s), or choose another name", name, old.State, name)
	} else if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	sc, err := appendAndRead(ctx, f, r, schemas.TypeScheduleAdd, p, name)
	if err != nil {
		return err
	}
	if o.json {
		return f.IO.PrintJSON(sc)
	}
	fmt.Fprintf(f.IO.Out, "schedule %s added: %s; next %s\n", name, describe(sc.Spec), next(sc, f.Now()))
	return nil
}

// appendAndRead appends one schedule event and returns the schedule as the
// projections have it after it; a refusal is the error.
func appendAndRead(ctx context.Context, f *cmdutil.Factory, r *cmdutil.StateReader, t schemas.Type, payload any, name string) (*projections.Schedule, error) {
	env, err := schemas.New(t, schemas.SystemSession, "user", "user", f.Now(), payload)
	if err != nil {
		return nil, err
	}
	if _, err := r.AppendApplied(ctx, env); err != nil {
		return nil, err
	}
	return r.Schedule(ctx, name)
}

func newCmdControl(f *cmdutil.Factory, verb, short string, t schemas.Type, from ...string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, name := cmd.Context(), args[0]
			r, err := f.State(ctx)
			if err != nil {
				return err
			}
			defer r.Close()
			sc, err := find(ctx, r, name)
			if err != nil {
				return err
			}
			if !strings.Contains(strings.Join(from, " "), sc.State) {
				return cmdutil.Usagef("schedule %s is %s: %s applies to a schedule that is %s", name, sc.State, verb, strings.Join(from, " or "))
			}
			if sc, err = appendAndRead(ctx, f, r, t, schemas.ScheduleControl{Name: name, Reason: "sylk schedule " + verb}, name); err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(sc)
			}
			fmt.Fprintf(f.IO.Out, "schedule %s is %s\n", name, sc.State)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the schedule as JSON")
	return cmd
}

// find returns a schedule that exists and is not removed.
func find(ctx context.Context, r *cmdutil.StateReader, name string) (*projections.Schedule, error) {
	sc, err := r.Schedule(ctx, name)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && sc.State == projections.ScheduleRemoved) {
		return nil, fmt.Errorf("no schedule %q: see sylk schedule ls", name)
	}
	return sc, err
}

func newCmdList(f *cmdutil.Factory) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the schedules: state, when, next firing, last outcome",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			scs, err := r.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			out := scs[:0]
			for _, sc := range scs {
				if all || sc.State != projections.ScheduleRemoved {
					out = append(out, sc)
				}
			}
			if asJSON {
				return f.IO.PrintJSON(out)
			}
			if len(out) == 0 {
				fmt.Fprintln(f.IO.ErrOut, "no schedules: add one with sylk schedule add")
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tWHEN\tNEXT\tRUNS\tLAST\tFAILURES")
			for _, sc := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\n", sc.Name, sc.State, describe(sc.Spec), next(sc, f.Now()), sc.Fired, last(sc), sc.Failures)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the schedules as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "include removed schedules")
	return cmd
}

func newCmdShow(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule: what it runs, when, and its newest runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			sc, err := r.Schedule(cmd.Context(), args[0])
			if errors.Is(err, projections.ErrNotFound) {
				return fmt.Errorf("no schedule %q: see sylk schedule ls", args[0])
			} else if err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(sc)
			}
			w := f.IO.Out
			fmt.Fprintf(w, "schedule %s: %s\n", sc.Name, sc.State)
			fmt.Fprintf(w, "when:     %s\n", describe(sc.Spec))
			fmt.Fprintf(w, "next:     %s\n", next(sc, f.Now()))
			switch {
			case sc.Request != "":
				fmt.Fprintf(w, "request:  %q (agent tier)\n", sc.Request)
			case sc.PlanFile != "":
				fmt.Fprintf(w, "plan:     %s as added (direct tier for tool nodes)\n", sc.PlanFile)
			default:
				fmt.Fprintln(w, "plan:     from standard input, as added")
			}
			fmt.Fprintf(w, "work dir: %s\n", sc.WorkDir)
			if sc.Failures > 0 || sc.Reason != "" {
				fmt.Fprintf(w, "failures: %d in a row: %s\n", sc.Failures, sc.Reason)
			}
			for _, run := range sc.Runs {
				fmt.Fprintf(w, "  %s  %-9s  %s", run.Due.Local().Format(time.DateTime), run.Outcome, run.Session)
				if run.Missed > 0 {
					fmt.Fprintf(w, "  (for %d missed)", run.Missed+1)
				}
				if run.Reason != "" {
					fmt.Fprintf(w, "  %s", run.Reason)
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the schedule as JSON")
	return cmd
}

func describe(s schemas.ScheduleSpec) string {
	var d string
	switch {
	case s.Cron != "":
		d = "cron " + s.Cron
	case s.Every != "":
		d = "every " + s.Every
	default:
		d = "once at " + s.At
	}
	if s.TZ != "" {
		d += " (" + s.TZ + ")"
	}
	return d
}

// next is when the schedule fires next, as the scheduler will see it.
func next(sc *projections.Schedule, now time.Time) string {
	if sc.State != projections.ScheduleActive {
		return "-"
	}
	c, err := sched.Compile(sc.Spec)
	if err != nil {
		return "never: " + err.Error()
	}
	from := sc.LastDue
	if from.IsZero() {
		from = sc.Created
	}
	t := c.Next(from)
	if t.IsZero() {
		return "never (fired)"
	}
	if sc.Failures > 0 {
		if b := sc.LastFailure.Add(sched.Backoff(sc.Failures)); b.After(t) {
			return "after " + b.Local().Format(time.DateTime) + " (backing off)"
		}
	}
	if t.Before(now) {
		return "now (due " + t.Local().Format(time.DateTime) + ")"
	}
	return t.Local().Format(time.DateTime)
}

func last(sc *projections.Schedule) string {
	if len(sc.Runs) == 0 {
		return "-"
	}
	return sc.Runs[len(sc.Runs)-1].Outcome
}
