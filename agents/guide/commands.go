package guide

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/schemas"
)

// command is a slash command: deterministic, no LLM (seed L2278-2281,
// L2349-2357).
type command struct {
	usage string
	help  string
	run   func(g *Guide, ctx context.Context, d *agents.Delivery, args []string) ([]*schemas.Envelope, error)
}

// commands is the table of slash commands (a function: /help reads it).
func commands() map[string]command {
	return map[string]command{
		"/help":      {"/help", "list the commands", (*Guide).help},
		"/status":    {"/status", "this session's state, its workflows and what waits on you", (*Guide).status},
		"/tasks":     {"/tasks", "the same, for the workflows' tasks", (*Guide).status},
		"/session":   {"/session new [NAME] | list | switch ID | suspend | resume ID", "manage sessions", (*Guide).session},
		"/plan":      {"/plan REQUEST | mode on|off", "ask the Architect for a plan (needs an LLM); plan mode: explore and plan, change nothing", (*Guide).plan},
		"/approve":   {"/approve PLAN_ID", "approve a plan", (*Guide).approve},
		"/interrupt": {"/interrupt [REASON]", "stop the running work to change course", (*Guide).interrupt},
		"/clear":     {"/clear", "start a new conversation (the history stays in the log)", (*Guide).clear},
		"/task": {"/task PIPELINE [prompt|query|interrupt|ignore_inspector|ignore_tester|stop_handoffs] [TEXT]",
			"talk to a pipeline's Engineer, stop it, skip its Inspector or Tester, or stop its chain of handoffs", (*Guide).task},
	}
}

func (g *Guide) userInput(ctx context.Context, d *agents.Delivery, text string) ([]*schemas.Envelope, error) {
	if text == "" {
		return notice(d, "empty", schemas.NoticeWarn, "empty message", "type a request, or /help")
	}
	if strings.HasPrefix(text, "/") {
		fields := strings.Fields(text)
		cmd, ok := commands()[fields[0]]
		if !ok {
			return notice(d, "unknown-command", schemas.NoticeError, fmt.Sprintf("unknown command %s", fields[0]), "/help lists the commands")
		}
		return cmd.run(g, ctx, d, fields[1:])
	}
	if out, held, err := g.hold(ctx, d, text); held || err != nil {
		return out, err
	}
	if g.Classifier == nil {
		return notice(d, "no-llm", schemas.NoticeError,
			fmt.Sprintf("%q needs an LLM to be understood, and %v", truncate(text, 80), ErrNoLLM),
			g.llmHint()+"; or run a plan file with tool nodes: sylk run plan.yaml")
	}
	outs, err := g.Classifier.Classify(ctx, d, text)
	if err != nil {
		return nil, err
	}
	return outs, nil
}

func (g *Guide) llmHint() string {
	if g.LLMHint != "" {
		return g.LLMHint
	}
	return "set --llm-base-url and --llm-model (or SYLK_LLM_BASE_URL, SYLK_LLM_MODEL) and OPENAI_API_KEY"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func (g *Guide) help(_ context.Context, d *agents.Delivery, _ []string) ([]*schemas.Envelope, error) {
	table := commands()
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("commands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-58s %s\n", table[n].usage, table[n].help)
	}
	b.WriteString("anything else is a request in plain words (needs an LLM)")
	return notice(d, "help", schemas.NoticeInfo, b.String(), "")
}

func (g *Guide) status(ctx context.Context, d *agents.Delivery, _ []string) ([]*schemas.Envelope, error) {
	if err := g.caughtUp(ctx, d); err != nil {
		return nil, err
	}
	s, err := g.State.Status(ctx, d.Env.SessionID)
	if err != nil {
		return notice(d, "status", schemas.NoticeError, err.Error(), "'sylk session list' shows the sessions")
	}
	return notice(d, "status", schemas.NoticeInfo, s, "")
}

func (g *Guide) session(ctx context.Context, d *agents.Delivery, args []string) ([]*schemas.Envelope, error) {
	usage := commands()["/session"].usage
	if len(args) == 0 {
		return notice(d, "session-usage", schemas.NoticeError, "usage: "+usage, "")
	}
	sid := d.Env.SessionID
	switch args[0] {
	case "list":
		if err := g.caughtUp(ctx, d); err != nil {
			return nil, err
		}
		s, err := g.State.Sessions(ctx)
		if err != nil {
			return nil, agents.Transient(err, 0)
		}
		return notice(d, "session-list", schemas.NoticeInfo, s, "")
	case "new":
		name := strings.Join(args[1:], " ")
		id := schemas.DeriveID(d.Env, "session-new")
		out, err := d.DeriveSession(id, schemas.TypeSessionCreate, "user", "session-new", schemas.SessionCreate{Name: name})
		if err != nil {
			return nil, agents.Permanent(err)
		}
		act, err := d.DeriveSession(id, schemas.TypeSessionSwitch, "user", "session-new-switch", schemas.SessionSwitch{From: sid})
		if err != nil {
			return nil, agents.Permanent(err)
		}
		return []*schemas.Envelope{out, act}, nil
	case "switch", "resume":
		if len(args) != 2 || !schemas.ValidName(args[1]) {
			return notice(d, "session-usage", schemas.NoticeError, "usage: "+usage, "")
		}
		t, p := schemas.TypeSessionSwitch, any(schemas.SessionSwitch{From: sid})
		if args[0] == "resume" {
			t, p = schemas.TypeSessionResume, schemas.SessionResume{Reason: "/session resume"}
		}
		return one(d.DeriveSession(args[1], t, "user", "session-"+args[0], p))
	case "suspend":
		return one(d.Derive(schemas.TypeSessionSuspend, "user", "session-suspend", schemas.SessionSuspend{Reason: "/session suspend"}))
	}
	return notice(d, "session-usage", schemas.NoticeError, fmt.Sprintf("unknown /session %s; usage: %s", args[0], usage), "")
}

func (g *Guide) plan(ctx context.Context, d *agents.Delivery, args []string) ([]*schemas.Envelope, error) {
	if len(args) == 0 {
		return notice(d, "plan-usage", schemas.NoticeError, "usage: "+commands()["/plan"].usage, "")
	}
	if args[0] == "mode" && len(args) == 2 && (args[1] == "on" || args[1] == "off") {
		if args[1] == "on" {
			return one(d.Derive(schemas.TypePlanEnter, "architect", "plan-mode", schemas.PlanEnter{Reason: "/plan mode on"}))
		}
		return one(d.Derive(schemas.TypePlanExit, "architect", "plan-mode", schemas.PlanExit{Reason: "/plan mode off"}))
	}
	if g.Classifier == nil {
		return notice(d, "no-llm", schemas.NoticeError, "/plan needs an LLM: "+ErrNoLLM.Error(), g.llmHint())
	}
	return one(d.Derive(schemas.TypePlanRequest, "architect", "plan", schemas.PlanRequest{Request: strings.Join(args, " ")}))
}

func (g *Guide) approve(ctx context.Context, d *agents.Delivery, args []string) ([]*schemas.Envelope, error) {
	if len(args) != 1 {
		return notice(d, "approve-usage", schemas.NoticeError, "usage: "+commands()["/approve"].usage, "/status shows the plan waiting for you")
	}
	if g.State != nil && !g.State.PlanWaits(ctx, d.Env.SessionID, args[0]) {
		return notice(d, "approve-refused", schemas.NoticeError, fmt.Sprintf("no plan %q awaits approval in session %s; nothing was approved", args[0], d.Env.SessionID),
			"/status shows the plan waiting for you")
	}
	return one(d.Derive(schemas.TypePlanApproved, "architect", "approve", schemas.PlanApproved{PlanID: args[0]}))
}

func (g *Guide) interrupt(_ context.Context, d *agents.Delivery, args []string) ([]*schemas.Envelope, error) {
	return one(d.Derive(schemas.TypeUserInterrupt, "architect", "interrupt", schemas.UserInterrupt{Reason: strings.Join(args, " ")}))
}

func (g *Guide) clear(_ context.Context, d *agents.Delivery, _ []string) ([]*schemas.Envelope, error) {
	return notice(d, "clear", schemas.NoticeInfo, "new conversation; earlier messages stay in the session's log ('sylk replay "+d.Env.SessionID+"')", "")
}

// taskActions are the /task actions (seed L25931-25958) and their messages.
var taskActions = map[string]schemas.Type{
	"prompt":           schemas.TypeUserTaskPrompt,
	"query":            schemas.TypeUserTaskQuery,
	"interrupt":        schemas.TypeUserTaskInterrupt,
	"ignore_inspector": schemas.TypeUserIgnoreInspector,
	"ignore_tester":    schemas.TypeUserIgnoreTester,
	"stop_handoffs":    schemas.TypeUserStopHandoffs,
}

// task routes a /task message to the pipeline agent; without an action the
// text is a prompt for the pipeline's Engineer.
func (g *Guide) task(_ context.Context, d *agents.Delivery, args []string) ([]*schemas.Envelope, error) {
	usage := commands()["/task"].usage
	if len(args) == 0 || !schemas.ValidName(args[0]) {
		return notice(d, "task-usage", schemas.NoticeError, "usage: "+usage, "sylk pipeline ls lists the pipelines")
	}
	t, rest := schemas.TypeUserTaskPrompt, args[1:]
	if len(rest) > 0 {
		if at, ok := taskActions[rest[0]]; ok {
			t, rest = at, rest[1:]
		}
	}
	text := strings.Join(rest, " ")
	if text == "" && (t == schemas.TypeUserTaskPrompt || t == schemas.TypeUserTaskQuery) {
		return notice(d, "task-usage", schemas.NoticeError, "say what to tell the Engineer; usage: "+usage, "")
	}
	payload, err := schemas.NewTaskMessage(t, schemas.UserTaskMessage{PipelineID: args[0], Text: text})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return one(d.Derive(t, "pipeline", "task", payload))
}
