package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
)

// StateWithPause is a session's state, marked when it is paused (and by
// whom, when not by the user: the server's resource governor).
func StateWithPause(s *projections.Session) string {
	switch {
	case s.Paused && s.PausedBy != "" && s.PausedBy != "user":
		return string(s.State) + " (paused by " + s.PausedBy + ")"
	case s.Paused:
		return string(s.State) + " (paused)"
	}
	return string(s.State)
}

// PrintSession shows a session: its state, history, context, DAGs and what
// waits on the user.
func PrintSession(w io.Writer, s *projections.Session, dags []*projections.DAG, pending []*projections.PendingRequest) {
	focus := ""
	if s.Focused {
		focus = ", focused"
	}
	fmt.Fprintf(w, "session %s: %s%s\n", s.ID, StateWithPause(s), focus)
	if s.Name != "" {
		fmt.Fprintf(w, "  name:      %s\n", s.Name)
	}
	fmt.Fprintf(w, "  created:   %s (seq %d)\n", s.CreatedAt.Local().Format(time.DateTime), s.CreatedSeq)
	if f := s.Fork; f != nil {
		fmt.Fprintf(w, "  fork of:   %s at seq %d (its history up to there is this session's)\n", f.Parent, f.ParentSeq)
	}
	for _, t := range []struct {
		label string
		at    *time.Time
	}{{"activated", s.ActivatedAt}, {"suspended", s.SuspendedAt}, {"completed", s.CompletedAt}, {"failed", s.FailedAt}} {
		if t.at != nil {
			fmt.Fprintf(w, "  %-10s %s\n", t.label+":", t.at.Local().Format(time.DateTime))
		}
	}
	if s.LastSeq > 0 {
		fmt.Fprintf(w, "  last event: seq %d at %s\n", s.LastSeq, s.LastActiveAt.Local().Format(time.DateTime))
	}
	if s.Summary != "" {
		fmt.Fprintf(w, "  summary:   %s\n", s.Summary)
	}
	if s.FailReason != "" {
		fmt.Fprintf(w, "  failed:    %s\n", s.FailReason)
	}
	if moves := projections.Allowed(s.State); len(moves) > 0 {
		var m []string
		for _, x := range moves {
			m = append(m, string(x))
		}
		fmt.Fprintf(w, "  can:       %s\n", strings.Join(m, ", "))
	}
	c := s.Context
	for _, l := range []struct{ label, v string }{
		{"task", c.CurrentTask}, {"step", c.CurrentStep}, {"objective", c.CurrentObjective},
		{"done", strings.Join(c.CompletedSteps, "; ")}, {"next", strings.Join(c.NextSteps, "; ")},
		{"blockers", strings.Join(c.Blockers, "; ")}, {"modified", strings.Join(c.ModifiedFiles, " ")},
	} {
		if l.v != "" {
			fmt.Fprintf(w, "  %-10s %s\n", l.label+":", l.v)
		}
	}
	fmt.Fprintln(w, "  history:")
	for _, t := range s.Transitions {
		from := string(t.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(w, "    seq %-6d %s  %s → %s (%s)\n", t.Seq, t.At.Local().Format(time.DateTime), from, t.To, t.Event)
	}
	if len(dags) > 0 {
		fmt.Fprintln(w, "  dags:")
		for _, d := range dags {
			fmt.Fprintf(w, "    %s %s: %s\n", d.ID, OrDash(d.Name), DAGProgress(d))
		}
	}
	if len(pending) > 0 {
		fmt.Fprintln(w, "  waiting on you:")
		for _, p := range pending {
			what := p.Question
			if p.Kind == projections.KindPlan {
				what = "approve plan " + p.PlanID
			}
			fmt.Fprintf(w, "    %s from %s (%s): %s\n", p.Kind, p.Asker, p.Correlation, cmdutil.TruncateRunes(what, 100))
		}
	}
}
