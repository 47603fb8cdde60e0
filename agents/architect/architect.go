// Package architect is the Architect: it turns a request in plain words into a
// DAG in the plan format (agents/plan), checked by the same validator the
// Orchestrator runs, and puts it to the user (seed L14028-14540). An invalid
// DAG goes back to the model with every problem, a bounded number of times; it
// is never executed. The user approves (plan_approved: the DAG goes to the
// Orchestrator), asks for changes (plan_modified: a new plan) or rejects it.
// When the request cannot be planned without an answer, the Architect asks a
// clarification_request, and plans again with the answer.
//
// Every model call goes through the llm package, recorded: a redelivered
// message reuses the answers, and a replayed session calls nothing.
package architect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Name is the Architect's agent name.
const Name = "architect"

// DefaultMaxRepairs is how many times an invalid plan is sent back to the
// model before the Architect gives up.
const DefaultMaxRepairs = 2

// Completer makes recorded LLM calls and fits conversations into the
// window: *llm.Client.
type Completer = toolloop.LLM

// Store is what the Architect reads from the projections: *projections.Store.
type Store interface {
	agents.Caught
	// PendingRequest finds a plan or clarification by correlation id or by
	// the id of its event (a plan's id is its plan_response's event id).
	PendingRequest(ctx context.Context, session, ref string) (*projections.PendingRequest, error)
	// Session gives a session's work directory.
	Session(ctx context.Context, id string) (*projections.Session, error)
	// PlanMode gives a session's plan mode (ErrNotFound: never entered).
	PlanMode(ctx context.Context, session string) (*projections.PlanMode, error)
}

// Architect plans.
type Architect struct {
	// LLM is nil when no LLM is configured: requests get a notice saying
	// how to configure one.
	LLM   Completer
	Store Store
	// Catalog is what plans are validated against: the Orchestrator's.
	Catalog plan.Catalog
	// Tools describe the tools' arguments to the model.
	Tools []tools.ToolSpec
	// MaxRepairs bounds the invalid plans sent back (default
	// DefaultMaxRepairs).
	MaxRepairs int
	// LLMHint says how to configure an LLM.
	LLMHint string
	// Executors run the read-only tools the Architect explores with in plan
	// mode, and Records finds their recorded results (nil Executors: plan
	// mode is refused).
	Executors *worker.Executors
	Records   agents.ToolRecords
	// Consult gives the Architect its consult tools (nil: none).
	Consult toolloop.Consulter
	// ExploreSteps bounds the model calls of one exploration (default
	// toolloop.DefaultSteps).
	ExploreSteps int
}

// Handle takes the messages addressed to the Architect.
func (a *Architect) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	switch d.Env.Type {
	case schemas.TypePlanRequest:
		p, err := schemas.PayloadAs[schemas.PlanRequest](d.Env)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		j := job{request: strings.TrimSpace(p.Request)}
		state, err := a.planMode(ctx, d)
		switch {
		case err != nil:
			return nil, err
		case state == schemas.PlanExploring || state == schemas.PlanDrafting:
			if j.request == "" {
				return a.plan(ctx, d, j) // the empty-request notice
			}
			if a.LLM == nil {
				return notice(d, "no-llm", schemas.NoticeError, "plan mode needs an LLM: "+llm.ErrNotConfigured.Error(), a.hint())
			}
			return a.explore(ctx, d, j)
		case state == schemas.PlanAwaitingApproval || state == schemas.PlanApprovedState || state == schemas.PlanExecuting:
			return notice(d, "plan-busy", schemas.NoticeWarn, fmt.Sprintf("session %s is in plan mode with a plan %s; this request waits", d.Env.SessionID, strings.ReplaceAll(state, "_", " ")),
				"settle the plan first: sylk plan show; sylk plan approve|modify|reject")
		}
		return a.plan(ctx, d, j)
	case schemas.TypePlanApproved:
		return a.approved(ctx, d)
	case schemas.TypePlanModified:
		return a.modified(ctx, d)
	case schemas.TypeClarificationResponse:
		return a.answered(ctx, d)
	case schemas.TypePlanEnter, schemas.TypePlanExit:
		return a.modeChanged(ctx, d)
	case schemas.TypeConsultResponse:
		return nil, nil // the exploring loop read it from the consults projection
	case schemas.TypeUserInterrupt:
		return a.interrupt(d)
	case schemas.TypeDAGStatus, schemas.TypeValidationCorrections, schemas.TypeTestDAGRequest,
		schemas.TypeTestCorrections, schemas.TypeDomainExpectationsResponse:
		return notice(d, "not-handled", schemas.NoticeInfo,
			fmt.Sprintf("the Architect does not act on %s yet; it is kept in the log", d.Env.Type), "")
	}
	return nil, agents.Unhandled(Name, d.Env.Type)
}

// job is one planning task: the request, and what came since.
type job struct {
	request string
	// previous is the plan the user wants changed, feedback what they said.
	previous *schemas.DAG
	feedback string
	// previousMode is the plan-mode plan the user wants changed.
	previousMode *schemas.ModePlan
	// question and answer are a clarification round.
	question, answer string
}

func (a *Architect) maxRepairs() int {
	if a.MaxRepairs > 0 {
		return a.MaxRepairs
	}
	return DefaultMaxRepairs
}

// answer is the model's reply: a plan or a question.
type answer struct {
	Action     string          `json:"action"`
	Rationale  string          `json:"rationale"`
	Confidence float64         `json:"confidence"`
	Question   string          `json:"question"`
	Options    []string        `json:"options"`
	Plan       json.RawMessage `json:"plan"`
}

// plan asks the model for a plan, repairs it while it is invalid, and
// returns the plan_response (or clarification_request) for the user.
func (a *Architect) plan(ctx context.Context, d *agents.Delivery, j job) ([]*schemas.Envelope, error) {
	if j.request == "" {
		return notice(d, "empty", schemas.NoticeError, "the plan request is empty", "say what you want done: sylk run \"...\"")
	}
	if a.LLM == nil {
		return notice(d, "no-llm", schemas.NoticeError, "planning a request needs an LLM: "+llm.ErrNotConfigured.Error(), a.hint())
	}
	msgs := []schemas.LLMMessage{{Role: "system", Content: a.systemPrompt()}, {Role: "user", Content: j.prompt(d.Env)}}
	var probs []string
	seen := 0
	for try := 0; try <= a.maxRepairs(); try++ {
		resp, _, err := a.LLM.Complete(ctx, d, llm.Request{Key: fmt.Sprintf("plan/%d", try), Messages: msgs, Seen: seen, JSON: true})
		if err != nil {
			return a.failed(ctx, d, err)
		}
		seen = len(msgs)
		var ans answer
		var dag *schemas.DAG
		ans, dag, probs = a.check(resp.Content)
		if len(probs) == 0 {
			if ans.Action == "clarify" {
				return a.ask(d, j, ans)
			}
			return a.respond(d, j, ans, dag, nil)
		}
		msgs = append(msgs,
			schemas.LLMMessage{Role: "assistant", Content: resp.Content},
			schemas.LLMMessage{Role: "user", Content: "That answer cannot be used:\n- " + strings.Join(probs, "\n- ") +
				"\nReply with the corrected JSON object only, in the same format."})
	}
	return notice(d, "invalid-plan", schemas.NoticeError,
		fmt.Sprintf("no valid plan after %d tries; the last one had these problems:\n- %s", a.maxRepairs()+1, strings.Join(probs, "\n- ")),
		"rephrase the request, or write the plan yourself and run it: sylk run plan.yaml")
}

// check reads the model's reply: a clarification, or a plan that parses and
// validates. It returns every problem found.
func (a *Architect) check(content string) (answer, *schemas.DAG, []string) {
	var ans answer
	raw := jsonObject(content)
	if raw == "" {
		return ans, nil, []string{"the reply is not a JSON object"}
	}
	if err := json.Unmarshal([]byte(raw), &ans); err != nil {
		return ans, nil, []string{"the reply is not valid JSON: " + err.Error()}
	}
	switch ans.Action {
	case "clarify":
		if strings.TrimSpace(ans.Question) == "" {
			return ans, nil, []string{`"action": "clarify" needs a "question"`}
		}
		return ans, nil, nil
	case "plan":
	default:
		return ans, nil, []string{fmt.Sprintf(`"action" must be "plan" or "clarify", not %q`, ans.Action)}
	}
	if len(ans.Plan) == 0 || string(ans.Plan) == "null" {
		return ans, nil, []string{`"action": "plan" needs a "plan" object with "nodes"`}
	}
	p, err := plan.Parse(ans.Plan)
	if err == nil {
		p.DAG.ID = "" // the Architect names the DAG after the plan
		err = plan.Validate(&p.DAG, p.ExecutionOrder, a.Catalog)
	}
	if err != nil {
		var probs plan.Problems
		if errors.As(err, &probs) {
			return ans, nil, probs
		}
		return ans, nil, []string{err.Error()}
	}
	if ans.Confidence < 0 || ans.Confidence > 1 {
		ans.Confidence = 0
	}
	return ans, &p.DAG, nil
}

// jsonObject is the outermost {...} of s: models wrap JSON in prose or fences.
func jsonObject(s string) string {
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return ""
	}
	return s[i : j+1]
}

// respond is the plan_response: its plan id is its event id, and the DAG is
// named after it. mode is the plan drafted in plan mode, if it was.
func (a *Architect) respond(d *agents.Delivery, j job, ans answer, dag *schemas.DAG, mode *schemas.ModePlan) ([]*schemas.Envelope, error) {
	env, err := d.Derive(schemas.TypePlanResponse, "user", "plan", schemas.PlanResponse{})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	dag.ID = env.ID
	if dag.Name == "" {
		dag.Name = name(j.request)
	}
	if err := env.SetPayload(schemas.PlanResponse{PlanID: env.ID, DAG: *dag, Rationale: strings.TrimSpace(ans.Rationale), Mode: mode}); err != nil {
		return nil, agents.Permanent(err)
	}
	keepIntent(env, j.request)
	if ans.Confidence > 0 {
		env.ConfidenceChain = append(env.ConfidenceChain, schemas.ConfidenceEntry{Agent: Name, Confidence: ans.Confidence, Reason: firstLine(ans.Rationale, 200)})
	}
	return []*schemas.Envelope{env}, nil
}

// ask is a clarification_request; its answer comes back to the Architect,
// which plans again with it.
func (a *Architect) ask(d *agents.Delivery, j job, ans answer) ([]*schemas.Envelope, error) {
	env, err := d.Derive(schemas.TypeClarificationRequest, "user", "clarify", schemas.ClarificationRequest{
		Question: strings.TrimSpace(ans.Question), Options: ans.Options, Context: j.request, Asker: Name,
	})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	keepIntent(env, j.request)
	return []*schemas.Envelope{env}, nil
}

// keepIntent makes sure the request travels with what follows from it.
func keepIntent(env *schemas.Envelope, request string) {
	if env.StructuredIntent == nil {
		env.StructuredIntent = &schemas.StructuredIntent{OriginalRequest: request}
	}
}

// failed turns an LLM error into what the user sees; a transient error goes
// back to the runner (the redelivery reuses the calls already answered).
func (a *Architect) failed(ctx context.Context, d *agents.Delivery, err error) ([]*schemas.Envelope, error) {
	if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
		return nil, err
	}
	hint := "check the LLM endpoint and model (sylk usage shows what was spent)"
	if errors.Is(err, llm.ErrBudgetExceeded) {
		hint = "raise the budget (--llm-budget-session, SYLK_LLM_BUDGET_SESSION) or start a new session"
	}
	return notice(d, "llm-failed", schemas.NoticeError, "planning failed: "+err.Error(), hint)
}

// approved sends an approved plan's DAG to the Orchestrator, once however
// often it is approved.
func (a *Architect) approved(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.PlanApproved](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	planEnv, resp, out, err := a.findPlan(ctx, d, p.PlanID)
	if planEnv == nil {
		return out, err
	}
	if resp.Mode != nil {
		if out, err := a.answerRefused(ctx, d, p.PlanID, "approved"); out != nil || err != nil {
			return out, err
		}
	}
	workDir, err := a.workDir(ctx, d)
	if err != nil {
		return nil, err
	}
	if err := plan.Validate(&resp.DAG, nil, a.Catalog); err != nil {
		return notice(d, "stale-plan", schemas.NoticeError, fmt.Sprintf("plan %s no longer validates: %v", p.PlanID, err), "ask for a new plan")
	}
	exec, err := d.Derive(schemas.TypeDAGExecute, "orchestrator", "execute", schemas.DAGExecute{DAG: resp.DAG, WorkDir: workDir})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	key := Name + "/execute"
	if planEnv.SessionID != d.Env.SessionID {
		// A plan a fork inherited: approved in the fork, it runs there,
		// under an id of the fork's, not as a duplicate of the parent's.
		key += "/" + d.Env.SessionID
	}
	exec.ID = schemas.DeriveID(planEnv, key)
	keepIntent(exec, requestOf(planEnv))
	return []*schemas.Envelope{exec}, nil
}

// workDir is the session's work directory ("" when it names none).
func (a *Architect) workDir(ctx context.Context, d *agents.Delivery) (string, error) {
	s, err := a.Store.Session(ctx, d.Env.SessionID)
	switch {
	case err == nil:
		return s.Config.WorkDir, nil
	case errors.Is(err, projections.ErrNotFound):
		return "", nil
	}
	return "", agents.Transient(err, 0)
}

// modified plans again with the user's feedback, or drops a rejected plan.
func (a *Architect) modified(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.PlanModified](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	planEnv, resp, out, err := a.findPlan(ctx, d, p.PlanID)
	if planEnv == nil {
		return out, err
	}
	if resp.Mode != nil {
		outcome := "modified"
		if p.Rejected {
			outcome = "rejected"
		}
		if out, err := a.answerRefused(ctx, d, p.PlanID, outcome); out != nil || err != nil {
			return out, err
		}
	}
	if p.Rejected {
		return notice(d, "rejected", schemas.NoticeInfo, fmt.Sprintf("plan %s dropped; nothing was run", p.PlanID), "ask again with sylk run \"...\"")
	}
	j := job{request: requestOf(planEnv), previous: &resp.DAG, feedback: p.Feedback}
	if resp.Mode != nil {
		j.previousMode = resp.Mode
		return a.explore(ctx, d, j)
	}
	return a.plan(ctx, d, j)
}

// answered plans again with the answer to a clarification (the Architect's,
// or the Guide's on its behalf).
func (a *Architect) answered(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.ClarificationResponse](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if err := a.Store.WaitFor(ctx, d.Seq); err != nil {
		return nil, agents.Transient(err, 0)
	}
	var pr *projections.PendingRequest
	for _, ref := range []string{p.InReplyTo, d.Env.CorrelationID} {
		if ref == "" {
			continue
		}
		if pr, err = a.Store.PendingRequest(ctx, d.Env.SessionID, ref); err == nil && pr.Kind == projections.KindClarification {
			break
		}
		pr = nil
	}
	if pr == nil {
		return notice(d, "unknown-question", schemas.NoticeWarn,
			fmt.Sprintf("no question %q waits for this answer", p.InReplyTo), "'sylk session show' lists what waits on you")
	}
	request := pr.Context
	if d.Env.StructuredIntent != nil && d.Env.StructuredIntent.OriginalRequest != "" {
		request = d.Env.StructuredIntent.OriginalRequest
	}
	return a.plan(ctx, d, job{request: request, question: pr.Question, answer: p.Answer})
}

// findPlan finds the plan_response of planID in the delivery's session; when
// there is none, it returns the notice to send instead.
func (a *Architect) findPlan(ctx context.Context, d *agents.Delivery, planID string) (*schemas.Envelope, *schemas.PlanResponse, []*schemas.Envelope, error) {
	if err := a.Store.WaitFor(ctx, d.Seq); err != nil {
		return nil, nil, nil, agents.Transient(err, 0)
	}
	pr, err := a.Store.PendingRequest(ctx, d.Env.SessionID, planID)
	if err != nil || pr.Kind != projections.KindPlan {
		if err != nil && !errors.Is(err, projections.ErrNotFound) {
			return nil, nil, nil, agents.Transient(err, 0)
		}
		out, nerr := notice(d, "unknown-plan", schemas.NoticeError, fmt.Sprintf("no plan %q in session %s", planID, d.Env.SessionID),
			"'sylk session show "+d.Env.SessionID+"' lists the plan waiting for you")
		return nil, nil, out, nerr
	}
	ev, err := d.Log().Get(ctx, pr.Seq)
	if err != nil {
		return nil, nil, nil, agents.Transient(fmt.Errorf("plan %s at seq %d: %w", planID, pr.Seq, err), 0)
	}
	resp, err := schemas.PayloadAs[schemas.PlanResponse](ev.Env)
	if err != nil {
		return nil, nil, nil, agents.Permanent(err)
	}
	return ev.Env, resp, nil, nil
}

// interrupt stops the session's running work and waits for instructions.
func (a *Architect) interrupt(d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.UserInterrupt](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	reason := p.Reason
	if reason == "" {
		reason = "interrupted by the user"
	}
	stop, err := d.Derive(schemas.TypeSignal, "orchestrator", "interrupt", schemas.Signal{Action: schemas.SignalCancel, Scope: schemas.ScopeSession, Reason: reason})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	n, err := d.Derive(schemas.TypeNotice, "user", "interrupted", schemas.Notice{Level: schemas.NoticeInfo,
		Text: "stopped the session's running work: " + reason, Hint: "say what to do instead: sylk run \"...\" or /plan ..."})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{stop, n}, nil
}

func (a *Architect) hint() string {
	if a.LLMHint != "" {
		return a.LLMHint
	}
	return llm.Hint
}

func notice(d *agents.Delivery, key, level, text, hint string) ([]*schemas.Envelope, error) {
	e, err := d.Derive(schemas.TypeNotice, "user", key, schemas.Notice{Level: level, Text: text, Hint: hint})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{e}, nil
}

func requestOf(env *schemas.Envelope) string {
	if env.StructuredIntent != nil {
		return env.StructuredIntent.OriginalRequest
	}
	return ""
}

// name makes a short DAG name from a request.
func name(request string) string {
	words := strings.Fields(request)
	if len(words) > 6 {
		words = words[:6]
	}
	return strings.Join(words, " ")
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = s[:n]
	}
	return s
}
