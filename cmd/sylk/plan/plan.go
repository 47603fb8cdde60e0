// Package plan is `sylk plan`: show, approve, reject or modify the
// Architect's plans, and answer the agents' questions.
package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// PlanOptions are the flags of the `sylk plan` commands.
type PlanOptions struct {
	// ID names the plan (or, for answer, the question): its id, its
	// correlation id or a unique prefix. Empty: the only one waiting.
	ID string
	// Text is the feedback of modify or the answer of answer.
	Text    string
	Session string
	Detach  bool
	Yes     bool
	JSON    bool
	// Interactive: stdin is a terminal, where a new plan is put to the user.
	Interactive bool
}

func NewCmdPlan(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show, approve, reject or modify the Architect's plans; answer its questions",
		Long: `A request in plain words ('sylk run "..."') becomes a plan: a DAG the
Architect proposes, which runs only once you approve it. When 'sylk run' could
not ask you (stdin not a terminal, no --yes), or you want to decide later, the
plan waits in its session; these commands settle it.

PLAN_ID may be left out when one plan waits (in the --session given, or in all
sessions); it may be the plan's id, its correlation id or a unique prefix.
'sylk session show S' lists what waits on you.

approve, modify and answer go on like 'sylk run': they follow the new plan or
the DAG until it ends (exit 0 only if it succeeded), unless --detach. With no
'sylk serve' running they run the agents themselves for that long.`,
	}
	cmd.AddCommand(newPlanModeCmd(f), newPlanShowCmd(f), newPlanApproveCmd(f), newPlanRejectCmd(f), newPlanModifyCmd(f), newPlanAnswerCmd(f))
	return cmd
}

func (o *PlanOptions) bind(cmd *cobra.Command, follows bool) {
	cmd.Flags().StringVar(&o.Session, "session", "", "the session of the plan (default: the one where a plan waits)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	if follows {
		cmd.Flags().BoolVar(&o.Detach, "detach", false, "record the answer and exit without following what it starts")
	}
}

func (o *PlanOptions) check() error {
	if o.Session != "" {
		if err := schemas.CheckName("--session", o.Session); err != nil {
			return cmdutil.UsageError{Err: err}
		}
	}
	return nil
}

func newPlanShowCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   "show [PLAN_ID]",
		Short: "Show a plan that waits for approval (its nodes and why), or a plan-mode plan and its progress",
		Long: `Show the plan that waits for your approval. In a session in plan mode
(--session, or the focused session) it shows the session's plan whether it
waits or runs: its files, its steps and todos with their glyphs
([ ] pending, [~] in progress, [x] completed, [!] failed, [-] skipped) and
what it considered; --json prints the plan-mode state with every version.`,
		Example: `  sylk plan show
  sylk plan show --session s-1a2b3c4d --json | jq '.dag.nodes[].id'
  sylk plan show --session s-1a2b3c4d --json | jq '.versions[-1].plan.steps'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.ID = args[0]
			}
			if err := opts.check(); err != nil {
				return err
			}
			return planShowRun(cmd.Context(), f, opts)
		},
	}
	opts.bind(cmd, false)
	return cmd
}

// planJSON is what `sylk plan show --json` prints.
type planJSON struct {
	Session     string `json:"session"`
	Correlation string `json:"correlation"`
	schemas.PlanResponse
}

func planShowRun(ctx context.Context, f *cmdutil.Factory, opts *PlanOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	// A session in plan mode shows its plan and how far it got, waiting or not.
	if opts.ID == "" {
		if pm := modeOf(ctx, r, opts.Session); pm != nil {
			return showMode(f, pm, opts.JSON)
		}
	}
	pr, err := openRequest(ctx, r, projections.KindPlan, opts.ID, opts.Session)
	if err != nil {
		return err
	}
	env, p, err := planOf(ctx, r, pr)
	if err != nil {
		return err
	}
	if pm, err := r.PlanMode(ctx, pr.Session); p.Mode != nil && err == nil && pm.PlanID == p.PlanID {
		return showMode(f, pm, opts.JSON)
	}
	if opts.JSON {
		return f.IO.PrintJSON(planJSON{Session: pr.Session, Correlation: pr.Correlation, PlanResponse: *p})
	}
	render.PrintPlan(f.IO.Out, pr.Session, env, p)
	return nil
}

func newPlanApproveCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   "approve [PLAN_ID]",
		Short: "Approve a plan: its DAG runs, followed until it ends",
		Example: `  sylk plan approve
  sylk plan approve 0f6c2a --session s-1a2b3c4d
  sylk plan approve --detach      # with 'sylk serve' running; follow with 'sylk tail'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.ID = args[0]
			}
			if err := opts.check(); err != nil {
				return err
			}
			return planAnswerRun(cmd.Context(), f, opts, schemas.TypePlanApproved)
		},
	}
	opts.bind(cmd, true)
	return cmd
}

func newPlanRejectCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   "reject [PLAN_ID]",
		Short: "Reject a plan: it is dropped and nothing runs",
		Example: `  sylk plan reject
  sylk plan reject 0f6c2a --session s-1a2b3c4d --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.ID = args[0]
			}
			if err := opts.check(); err != nil {
				return err
			}
			opts.Detach = true
			return planAnswerRun(cmd.Context(), f, opts, schemas.TypePlanModified)
		},
	}
	opts.bind(cmd, false)
	return cmd
}

func newPlanModifyCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   `modify [PLAN_ID] "FEEDBACK"`,
		Short: "Ask the Architect to change a plan: a new plan follows (needs an LLM)",
		Long: `Send your feedback on a plan to the Architect, which plans again with it. The
new plan is shown and, on a terminal, put to you as 'sylk run' does (--yes
approves it at once); otherwise it waits for 'sylk plan approve'.`,
		Example: `  sylk plan modify "run the race detector too"
  sylk plan modify 0f6c2a "no network access in the tests" --yes`,
		Args: cobra.RangeArgs(1, 2),
		RunE: textAnswerRunE(f, opts, schemas.TypePlanModified, "FEEDBACK is empty: say what should change (or use 'sylk plan reject')"),
	}
	opts.bind(cmd, true)
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "approve the new plan without asking")
	return cmd
}

// textAnswerRunE runs a command whose arguments are [ID] TEXT: it sends TEXT
// as an event of type t to what waits on the user, and refuses an empty TEXT
// with the usage error empty.
func textAnswerRunE(f *cmdutil.Factory, opts *PlanOptions, t schemas.Type, empty string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		opts.Text = args[len(args)-1]
		if len(args) == 2 {
			opts.ID = args[0]
		}
		if strings.TrimSpace(opts.Text) == "" {
			return cmdutil.Usagef("%s", empty)
		}
		if err := opts.check(); err != nil {
			return err
		}
		opts.Interactive = conversation.StdinTerminal(f.IO.In)
		return planAnswerRun(cmd.Context(), f, opts, t)
	}
}

func newPlanAnswerCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   `answer [QUESTION_ID] "ANSWER"`,
		Short: "Answer a question the agents asked before planning (needs an LLM)",
		Long: `Answer a clarification question (the Guide's or the Architect's) that waits on
you; the Architect plans with the answer, and the plan is shown and put to you
as 'sylk run' does.`,
		Example: `  sylk plan answer "the YAML loader in internal/config"
  sylk plan answer --session s-1a2b3c4d "B" --yes`,
		Args: cobra.RangeArgs(1, 2),
		RunE: textAnswerRunE(f, opts, schemas.TypeClarificationResponse, "ANSWER is empty"),
	}
	opts.bind(cmd, true)
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "approve the plan that follows without asking")
	return cmd
}

// planAnswerRun records the user's answer to what waits on them (t:
// plan_approved, plan_modified, clarification_response), then follows what it
// starts unless opts.Detach.
func planAnswerRun(ctx context.Context, f *cmdutil.Factory, opts *PlanOptions, t schemas.Type) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	kind := projections.KindPlan
	if t == schemas.TypeClarificationResponse {
		kind = projections.KindClarification
	}
	pr, err := openRequest(ctx, r, kind, opts.ID, opts.Session)
	if err != nil {
		return err
	}
	env, err := r.Log.Get(ctx, pr.Seq)
	if err != nil {
		return err
	}
	if env.Env == nil {
		return fmt.Errorf("the %s at seq %d cannot be read: %w", kind, pr.Seq, env.Err)
	}
	// With no server, this command runs the agents once the answer is
	// recorded: those that plan need an LLM.
	local := r.Store != nil
	_, llmErr := f.LLMConfig()
	if llmErr != nil && !errors.Is(llmErr, llm.ErrNotConfigured) {
		return llmErr
	}
	var p any
	var what string
	var approved *schemas.PlanResponse
	switch {
	case t == schemas.TypePlanApproved:
		if approved, err = schemas.PayloadAs[schemas.PlanResponse](env.Env); err != nil {
			return err
		}
		if local && llmErr != nil && !opts.Detach {
			for _, n := range approved.DAG.Nodes {
				if n.Prompt != "" {
					return conversation.ErrNeedsLLM(fmt.Sprintf("node %q of the plan is a prompt node, which", n.ID))
				}
			}
		}
		p, what = schemas.PlanApproved{PlanID: pr.PlanID}, "approved"
	case t == schemas.TypePlanModified && opts.Text == "":
		p, what = schemas.PlanModified{PlanID: pr.PlanID, Rejected: true}, "rejected; nothing was run"
	case t == schemas.TypePlanModified:
		p, what = schemas.PlanModified{PlanID: pr.PlanID, Feedback: opts.Text}, "sent back to the Architect with your feedback"
	default:
		p, what = schemas.ClarificationResponse{Answer: opts.Text, InReplyTo: pr.RequestID}, "answered"
	}
	if local && llmErr != nil && !opts.Detach && opts.Text != "" {
		return conversation.ErrNeedsLLM("planning again with your " + map[bool]string{true: "answer", false: "feedback"}[kind == projections.KindClarification])
	}
	if err := conversation.RefuseSecrets(ctx, f, r.Log, pr.Session, "your "+map[bool]string{true: "answer", false: "feedback"}[kind == projections.KindClarification], opts.Text); err != nil {
		return err
	}
	e, err := conversation.UserEvent(f, pr.Session, t, p, env.Env)
	if err != nil {
		return err
	}
	seq, err := r.AppendApplied(ctx, e)
	if err != nil {
		return err
	}
	ref := pr.PlanID
	if kind == projections.KindClarification {
		ref = pr.RequestID
	}
	if opts.Detach {
		if opts.JSON {
			return f.IO.PrintJSON(struct {
				Session string `json:"session"`
				ID      string `json:"id"`
				Kind    string `json:"kind"`
				State   string `json:"state"`
				Seq     uint64 `json:"seq"`
			}{pr.Session, ref, kind, stateAfter(t, opts.Text), seq})
		}
		fmt.Fprintf(f.IO.Out, "%s %s in session %s %s\n", kind, ref, pr.Session, what)
		if local && t != schemas.TypePlanModified || local && opts.Text != "" {
			fmt.Fprintln(f.IO.ErrOut, "no server runs: the agents take it up when one starts (sylk serve)")
		}
		return nil
	}
	fmt.Fprintf(f.IO.ErrOut, "%s %s in session %s %s\n", kind, ref, pr.Session, what)

	// Follow what the answer starts, with the agents running: a server's, or
	// this command's own once the read-only store is closed.
	r.Close()
	if local {
		f.Close(ctx)
	}
	b, _, err := f.Server(ctx)
	if err != nil {
		return err
	}
	c := &conversation.Conversation{F: f, Log: events.New(b.JetStream()), Session: pr.Session, Corr: pr.Correlation, From: seq,
		Yes: opts.Yes, JSON: opts.JSON, Interactive: opts.Interactive, Approved: approved}
	return c.Run(ctx)
}

func stateAfter(t schemas.Type, text string) string {
	switch {
	case t == schemas.TypePlanApproved:
		return projections.PendingApproved
	case t == schemas.TypePlanModified && text == "":
		return projections.PendingRejected
	case t == schemas.TypePlanModified:
		return projections.PendingModified
	}
	return projections.PendingAnswered
}

// openRequest finds the open request of kind that id names (a plan id, a
// correlation id, the request event's id, or a unique prefix of one), or,
// with no id, the only one open, in session or in every session.
func openRequest(ctx context.Context, r *cmdutil.StateReader, kind, id, session string) (*projections.PendingRequest, error) {
	open, err := r.Pending(ctx, session)
	if err != nil {
		return nil, err
	}
	var found []*projections.PendingRequest
	for _, p := range open {
		if p.Kind != kind {
			continue
		}
		if id == "" || matchesID(id, p.PlanID, p.Correlation, p.RequestID) {
			found = append(found, p)
		}
	}
	where := ""
	if session != "" {
		where = " in session " + session
	}
	noun := map[string]string{projections.KindPlan: "plan", projections.KindClarification: "question"}[kind]
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && id != "":
		return nil, fmt.Errorf("no %s %q waits on you%s ('sylk session show' lists what does)", noun, id, where)
	case len(found) == 0:
		return nil, fmt.Errorf("no %s waits on you%s", noun, where)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %ss wait on you%s; name one", len(found), noun, where)
	if session == "" {
		b.WriteString(" (or give --session)")
	}
	b.WriteString(":")
	for _, p := range found {
		ref := p.PlanID
		if kind == projections.KindClarification {
			ref = p.RequestID
		}
		fmt.Fprintf(&b, "\n  %s  session %s: %s", ref, p.Session, cmdutil.TruncateRunes(render.FirstLine(p.Question), 70))
	}
	return nil, cmdutil.UsageError{Err: errors.New(b.String())}
}

func matchesID(id string, ids ...string) bool {
	for _, x := range ids {
		if x != "" && (x == id || len(id) >= 4 && strings.HasPrefix(x, id)) {
			return true
		}
	}
	return false
}

// planOf reads the plan_response of a pending plan from the log.
func planOf(ctx context.Context, r *cmdutil.StateReader, pr *projections.PendingRequest) (*schemas.Envelope, *schemas.PlanResponse, error) {
	ev, err := r.Log.Get(ctx, pr.Seq)
	if err != nil {
		return nil, nil, err
	}
	if ev.Env == nil {
		return nil, nil, fmt.Errorf("the plan at seq %d cannot be read: %w", pr.Seq, ev.Err)
	}
	p, err := schemas.PayloadAs[schemas.PlanResponse](ev.Env)
	if err != nil {
		return nil, nil, err
	}
	return ev.Env, p, nil
}
