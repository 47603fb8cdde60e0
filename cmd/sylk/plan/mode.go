package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	agentplan "github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func newPlanModeCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   "mode on|off",
		Short: "Turn plan mode on or off: explore and plan first, change nothing until you approve",
		Long: `In plan mode the agents of a session only read and consult: writes, edits,
commits and commands that change anything are refused (the model is told why),
while the Architect explores the project and drafts a plan with the files it
will change, its steps and their dependencies, a todo list and what it
considered. Ask for the plan as usual ('sylk run "..."' or /plan REQUEST in the
session); it waits for you ('sylk plan show'). modify makes a new version;
approve runs it, and 'sylk plan show' follows its steps and todos:
[ ] pending, [~] in progress, [x] completed, [!] failed, [-] skipped.
While a plan waits for approval the Guide holds other messages of the session.

--session defaults to the focused session. Turning plan mode off is refused
while a plan awaits approval (approve, modify or reject it) or runs.`,
		Example: `  sylk plan mode on --session s-1a2b3c4d
  sylk run "add input validation to the config loader" --session s-1a2b3c4d --detach
  sylk plan show --session s-1a2b3c4d
  sylk plan mode off --session s-1a2b3c4d --json`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"on", "off"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "on" && args[0] != "off" {
				return cmdutil.Usagef("plan mode %q: say on or off", args[0])
			}
			if err := opts.check(); err != nil {
				return err
			}
			return planModeRun(cmd.Context(), f, opts, args[0] == "on")
		},
	}
	opts.bind(cmd, false)
	cmd.Flags().Lookup("session").Usage = "the session (default: the focused one)"
	return cmd
}

// planModeRun appends plan_enter or plan_exit after checking the move is
// allowed, so a refused one appends nothing.
func planModeRun(ctx context.Context, f *cmdutil.Factory, opts *PlanOptions, on bool) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	session, err := sessionOf(ctx, r, opts.Session)
	if err != nil {
		return err
	}
	state := schemas.PlanIdle
	pm, err := r.PlanMode(ctx, session)
	switch {
	case err == nil:
		state = pm.State
	case !errors.Is(err, projections.ErrNotFound):
		return err
	}
	if err := modeMove(session, state, pm, on); err != nil {
		return err
	}
	t, p, verb := schemas.TypePlanEnter, any(schemas.PlanEnter{Reason: "sylk plan mode on"}), "on"
	if !on {
		t, p, verb = schemas.TypePlanExit, schemas.PlanExit{Reason: "sylk plan mode off"}, "off"
	}
	e, err := conversation.UserEvent(f, session, t, p, nil)
	if err != nil {
		return err
	}
	seq, err := r.Log.Append(ctx, e)
	if err != nil {
		return err
	}
	if err := r.Sync(ctx, seq); err != nil {
		return err
	}
	if rej, err := r.Rejected(ctx, seq); err != nil {
		return err
	} else if rej != nil {
		return fmt.Errorf("plan mode %s was refused: %s", verb, rej.Reason)
	}
	if opts.JSON {
		after := schemas.PlanExploring
		if !on {
			after = schemas.PlanIdle
		}
		return f.IO.PrintJSON(struct {
			Session string `json:"session"`
			State   string `json:"state"`
			Seq     uint64 `json:"seq"`
		}{session, after, seq})
	}
	if on {
		fmt.Fprintf(f.IO.Out, "plan mode on in session %s: the agents only read and consult until you approve a plan\n", session)
	} else {
		fmt.Fprintf(f.IO.Out, "plan mode off in session %s\n", session)
	}
	return nil
}

// modeMove refuses a move the session's plan-mode state does not allow, with
// what to do instead (the plans projection applies the same rules).
func modeMove(session, state string, pm *projections.PlanMode, on bool) error {
	switch {
	case on && (state == schemas.PlanIdle || state == schemas.PlanCompleted || state == schemas.PlanFailed):
		return nil
	case on:
		return fmt.Errorf("session %s is already in plan mode (%s); 'sylk plan show --session %s' shows it", session, human(state), session)
	case state == schemas.PlanIdle:
		return fmt.Errorf("plan mode is off in session %s", session)
	case state == schemas.PlanAwaitingApproval:
		return fmt.Errorf("plan %s awaits your approval in session %s: approve, modify or reject it first (sylk plan approve|modify|reject)", pm.PlanID, session)
	case state == schemas.PlanApprovedState || state == schemas.PlanExecuting:
		return fmt.Errorf("plan %s runs in session %s: cancel it first (sylk signal cancel --session %s)", pm.PlanID, session, session)
	}
	return nil
}

func human(state string) string { return strings.ReplaceAll(state, "_", " ") }

// sessionOf is the session named, or the focused one.
func sessionOf(ctx context.Context, r *cmdutil.StateReader, session string) (string, error) {
	if session != "" {
		if _, err := r.Session(ctx, session); err != nil {
			return "", fmt.Errorf("%w ('sylk session list' shows the sessions)", err)
		}
		return session, nil
	}
	ss, err := r.Sessions(ctx, projections.SessionFilter{})
	if err != nil {
		return "", err
	}
	for _, s := range ss {
		if s.Focused {
			return s.ID, nil
		}
	}
	return "", cmdutil.Usagef("no session is focused: name one with --session ('sylk session list' shows them)")
}

// showMode prints a session's plan mode, its plan with the glyphs of its
// steps and todos; JSON prints the projection's state.
func showMode(f *cmdutil.Factory, pm *projections.PlanMode, asJSON bool) error {
	if asJSON {
		return f.IO.PrintJSON(pm)
	}
	agentplan.RenderMode(f.IO.Out, pm)
	return nil
}

// modeOf is the plan mode of the session named (or the focused one) when it
// is on, else nil.
func modeOf(ctx context.Context, r *cmdutil.StateReader, session string) *projections.PlanMode {
	session, err := sessionOf(ctx, r, session)
	if err != nil {
		return nil
	}
	pm, err := r.PlanMode(ctx, session)
	if err != nil || pm.State == schemas.PlanIdle {
		return nil
	}
	return pm
}
