package session

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/reexec"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/schemas"
)

func newSessionDiffCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Show where two sessions' histories part",
		Long: `Compare two sessions' histories event by event, in order (a fork's history
includes what it shares with its parent): events compare as re-execution
compares them (type, source, target and payload; not ids, sessions, times or
durations). Prints how many events are the same from the start, then the
first event of each side from the point they part, with the fields that
differ. Exit 0 when the histories are the same, 1 when they part.`,
		Example: `  sylk session diff s-parent s-fork
  sylk session diff s-1 s-2 --json | jq .fields`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := schemas.CheckName("session", id); err != nil {
					return cmdutil.UsageError{Err: err}
				}
			}
			return diffRun(cmd.Context(), f, args[0], args[1], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	return cmd
}

func diffRun(ctx context.Context, f *cmdutil.Factory, a, b string, asJSON bool) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	d, err := reexec.DiffSessions(ctx, r, a, b)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	if asJSON {
		if err := f.IO.PrintJSON(d); err != nil {
			return err
		}
	} else {
		printDiff(f.IO.Out, d)
	}
	if d.Parted {
		return cmdutil.ExitCodeError{Code: 1}
	}
	return nil
}

func printDiff(w io.Writer, d *reexec.SessionDiff) {
	if !d.Parted {
		fmt.Fprintf(w, "same: %s and %s have the same %d events\n", d.A, d.B, d.Same)
		return
	}
	fmt.Fprintf(w, "%s and %s share %d events, then part:\n", d.A, d.B, d.Same)
	for _, side := range []struct {
		name string
		ev   *reexec.Event
		rest int
	}{{d.A, d.AEvent, d.ARest}, {d.B, d.BEvent, d.BRest}} {
		if side.ev == nil {
			fmt.Fprintf(w, "  %-14s (ends)\n", side.name)
			continue
		}
		fmt.Fprintf(w, "  %-14s seq %d  %s→%s  %s  (%d events from here)\n", side.name, side.ev.Seq, side.ev.Source, side.ev.Target, side.ev.Type, side.rest)
	}
	for _, fd := range d.Fields {
		fmt.Fprintf(w, "    %s: %v -> %v\n", fd.Path, valueText(fd.Recorded), valueText(fd.New))
	}
}

func valueText(v any) string {
	if v == nil {
		return "(none)"
	}
	return fmt.Sprintf("%v", v)
}
