package architect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/planguard"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// planMode is the session's plan-mode state as of the delivery ("" when it
// never entered plan mode).
func (a *Architect) planMode(ctx context.Context, d *agents.Delivery) (string, error) {
	if err := a.Store.WaitFor(ctx, d.Seq); err != nil {
		return "", agents.Transient(err, 0)
	}
	pm, err := a.Store.PlanMode(ctx, d.Env.SessionID)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return "", nil
	case err != nil:
		return "", agents.Transient(err, 0)
	}
	return pm.State, nil
}

// answerRefused is the notice refusing the user's answer (outcome:
// approved, modified or rejected) to the plan-mode plan planID when the
// plans projection did not settle that plan with it: a version the user
// already answered or one a newer version replaced. Nil when it did (after
// the answer is folded, which a redelivery finds too).
func (a *Architect) answerRefused(ctx context.Context, d *agents.Delivery, planID, outcome string) ([]*schemas.Envelope, error) {
	if err := a.Store.WaitFor(ctx, d.Seq); err != nil {
		return nil, agents.Transient(err, 0)
	}
	pm, err := a.Store.PlanMode(ctx, d.Env.SessionID)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	for _, v := range pm.Versions {
		if v.PlanID == planID && v.Outcome == outcome {
			return nil, nil
		}
	}
	// The text names no plan-mode state: the projection may have folded
	// events after this one (the approved plan executing or not yet), and a
	// re-execution must produce the same notice.
	return notice(d, "not-awaiting", schemas.NoticeError,
		fmt.Sprintf("plan %s is not awaiting approval (the current plan of session %s is %s, version %d); it was not %s",
			planID, d.Env.SessionID, pm.PlanID, pm.Version, outcome),
		"sylk plan show, then answer the current version: sylk plan approve|modify|reject")
}

// explore is planning in plan mode (seed L36434-36590): the model explores
// the project with the read-only tools and by consulting the other agents,
// drafts a plan (plan_draft), and the draft goes back to exploration
// (plan_explore) while it has problems; a sound draft is the plan_response,
// with the plan and the DAG of its steps, for the user to approve. Every call
// is recorded: a redelivery replays the exploration for free.
func (a *Architect) explore(ctx context.Context, d *agents.Delivery, j job) ([]*schemas.Envelope, error) {
	if a.Executors == nil {
		return notice(d, "no-tools", schemas.NoticeError, "plan mode needs the Architect's read-only tools; this process has none", "")
	}
	workDir, err := a.workDir(ctx, d)
	if err != nil {
		return nil, err
	}
	exec, err := a.Executors.For(workDir)
	if err != nil {
		return notice(d, "no-workdir", schemas.NoticeError, err.Error(), "")
	}
	specs := exec.SchemasFor(Name)
	guarded, err := planguard.Wrap(ctx, exec, a.Store, d.Env.SessionID)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	loop := &toolloop.Loop{LLM: a.LLM, Records: a.Records, Runner: guarded,
		Specs: append(specs, a.consultSpecs()...), Consult: a.Consult, Key: "explore", Steps: a.ExploreSteps}
	msgs := []schemas.LLMMessage{{Role: "system", Content: a.exploreSystem(specs)}, {Role: "user", Content: j.prompt(d.Env)}}
	drafts := 0
	var ans answer
	var mode schemas.ModePlan
	var dag *schemas.DAG
	check := func(content string) string {
		ans, mode, dag = answer{}, schemas.ModePlan{}, nil
		raw := jsonObject(content)
		if raw == "" || json.Unmarshal([]byte(raw), &ans) != nil || ans.Action == "plan" && json.Unmarshal(ans.Plan, &mode) != nil {
			return `That is not the JSON answer. Reply with {"action": "plan", ...} or {"action": "clarify", ...} only.`
		}
		if ans.Action == "clarify" && strings.TrimSpace(ans.Question) != "" {
			return ""
		}
		if ans.Action != "plan" {
			return `"action" must be "plan" or "clarify".`
		}
		drafts++
		if err := a.appendNow(ctx, d, fmt.Sprintf("draft/%d", drafts), schemas.TypePlanDraft, schemas.PlanDraft{Title: mode.Title}); err != nil {
			return "" // reported below
		}
		var derr error
		dag, derr = plan.ModeDAG(&mode, a.Catalog)
		if derr == nil {
			return ""
		}
		var probs plan.Problems
		if !errors.As(derr, &probs) {
			probs = plan.Problems{derr.Error()}
		}
		if err := a.appendNow(ctx, d, fmt.Sprintf("explore/%d", drafts), schemas.TypePlanExplore, schemas.PlanExplore{Problems: probs}); err != nil {
			return ""
		}
		return "The plan cannot be used:\n- " + strings.Join(probs, "\n- ") + "\nExplore more if you need to, then reply with the corrected plan."
	}
	if _, _, err := loop.Run(ctx, d, msgs, check); err != nil {
		if errors.Is(err, toolloop.ErrSteps) {
			return notice(d, "explore-limit", schemas.NoticeError, "plan mode: "+err.Error(), "ask again with a narrower request")
		}
		return a.failed(ctx, d, err)
	}
	if ans.Action == "clarify" {
		return a.ask(d, j, ans)
	}
	if dag == nil { // a draft event could not be appended
		return nil, agents.Transient(errors.New("plan mode: recording the draft failed"), 0)
	}
	return a.respond(d, j, ans, dag, &mode)
}

// appendNow appends a plan-mode step of the exploration at once, so the
// session's state follows it; its id is derived, so a replay appends nothing.
func (a *Architect) appendNow(ctx context.Context, d *agents.Delivery, key string, t schemas.Type, p any) error {
	e, err := d.Derive(t, "user", key, p)
	if err != nil {
		return err
	}
	_, err = d.AppendNow(ctx, e)
	return err
}

func (a *Architect) exploreSystem(specs []tools.ToolSpec) string {
	var b strings.Builder
	b.WriteString("You are the Architect of Sylk, in plan mode. The session is read-only: you and every agent may only read and consult; " +
		"writes, edits, commits and commands that change anything are refused until the user approves your plan.\n")
	b.WriteString(Style + "\n\n")
	b.WriteString("First explore: read the files that matter with the tools")
	if len(a.consultSpecs()) > 0 {
		b.WriteString(", and consult the other agents (consult_<agent>) when their knowledge helps")
	}
	b.WriteString(". Then answer, without a tool call, with one JSON object and nothing else:\n")
	b.WriteString(`{"action": "plan", "rationale": "why this plan", "confidence": 0.8,
 "plan": {"title": "short title", "overview": "what changes and why, in a paragraph",
          "files": [{"path": "config.go", "action": "create|modify|delete", "description": "what changes in it"}],
          "steps": [{"description": "what to do, precisely", "agent": "engineer"},
                    {"description": "...", "agent": "tester", "depends_on": [1]}],
          "todos": [{"content": "Add the checks", "active_form": "Adding the checks", "step": 1}],
          "considerations": ["risks, assumptions, alternatives rejected"]}}
or, only when the request cannot be planned without the user, {"action": "clarify", "question": "...", "options": ["A: ...", "B: ..."]}.
Steps are numbered from 1 in order; depends_on names earlier steps; no cycles. Steps run as prompt nodes once approved.
`)
	fmt.Fprintf(&b, "Agents of steps: %s.\n", strings.Join(a.Catalog.PromptAgents, ", "))
	b.WriteString("Your tools:")
	for _, t := range specs {
		fmt.Fprintf(&b, " %s", t.Name)
	}
	b.WriteString("\n")
	return b.String()
}

func (a *Architect) consultSpecs() []tools.ToolSpec {
	if a.Consult == nil {
		return nil
	}
	return a.Consult.Specs(Name)
}

// modeChanged tells the user what plan_enter or plan_exit did: the plans
// projection decides, and says why when it refused.
func (a *Architect) modeChanged(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	if err := a.Store.WaitFor(ctx, d.Seq); err != nil {
		return nil, agents.Transient(err, 0)
	}
	pm, err := a.Store.PlanMode(ctx, d.Env.SessionID)
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return nil, agents.Transient(err, 0)
	}
	if pm != nil && len(pm.Transitions) > 0 && pm.Transitions[len(pm.Transitions)-1].Seq == d.Seq {
		if pm.State == schemas.PlanExploring {
			return notice(d, "plan-mode", schemas.NoticeInfo, "plan mode on in session "+d.Env.SessionID+
				": the agents only read and consult until you approve a plan", "say what you want planned: /plan REQUEST or sylk run \"...\"")
		}
		return notice(d, "plan-mode", schemas.NoticeInfo, "plan mode off in session "+d.Env.SessionID, "")
	}
	state := schemas.PlanIdle
	if pm != nil {
		state = pm.State
	}
	return notice(d, "plan-mode", schemas.NoticeWarn, fmt.Sprintf("%s refused: session %s is in plan-mode state %s", d.Env.Type, d.Env.SessionID, state),
		"sylk plan show --session "+d.Env.SessionID)
}
