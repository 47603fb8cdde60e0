package hooks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/skills"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Builtins configures the built-in hooks; each is left out when what it
// needs is nil.
type Builtins struct {
	// Policy: permission_check blocks a tool the agent's allow-list does not
	// grant, before anything is recorded or run.
	Policy *tools.Policy
	// GitMatrix: git_permissions blocks git operations by agent (nil: the
	// seed's GitMatrix; set NoGit to leave the hook out).
	GitMatrix map[string][]GitOp
	NoGit     bool
	// Redactor: redact_secrets removes secrets from every tool result and
	// model answer the model is shown (the executor's redactor).
	Redactor *tools.Redactor
	// Sessions: session_context adds the session's context (task, step,
	// objective, files) to the system prompt of every LLM call.
	Sessions SessionReader
	// Budget: token_budget blocks an LLM call that would pass a token
	// budget (*llm.Client).
	Budget BudgetChecker
	// Domains: step0 reroutes a message whose type is not in its agent's
	// domain to the Guide with a reroute_request, suggesting Owner(type).
	Domains map[string][]schemas.Type
	Owner   func(schemas.Type) string
}

// SessionReader reads a session: projections.Store.
type SessionReader interface {
	Session(ctx context.Context, id string) (*projections.Session, error)
}

// BudgetChecker checks the token budgets: *llm.Client.
type BudgetChecker interface {
	CheckBudget(ctx context.Context, session, dag, node string, estimate int64) error
}

// Hooks returns the configured built-in hooks.
func (b Builtins) Hooks() []Hook {
	var out []Hook
	if b.Domains != nil {
		out = append(out, Step0(b.Domains, b.Owner))
	}
	if b.Policy != nil {
		out = append(out, Permission(*b.Policy))
	}
	if !b.NoGit {
		m := b.GitMatrix
		if m == nil {
			m = GitMatrix
		}
		out = append(out, GitPermissions(m))
	}
	if b.Sessions != nil {
		out = append(out, SessionContext(b.Sessions))
	}
	if b.Budget != nil {
		out = append(out, TokenBudget(b.Budget))
	}
	if b.Redactor != nil {
		out = append(out, RedactSecrets(b.Redactor, PostTool), RedactSecrets(b.Redactor, PostPrompt))
	}
	return out
}

// Permission is the tool allow-list as a pre_tool hook. request_tools is
// every agent's tier-0 tool, not the tool layer's: it checks what it loads
// against the same allow-list itself. The consult_<agent> tools are not the
// tool layer's either: a consultation checks who may ask whom itself
// (agents/consult), and refuses an unknown agent.
func Permission(p tools.Policy) Hook {
	return Hook{Name: "permission_check", Point: PreTool, Priority: First, Source: "builtin",
		Run: func(_ context.Context, d *Data) (Decision, error) {
			if d.Tool == skills.RequestTools || strings.HasPrefix(d.Tool, toolloop.ConsultPrefix) || p.Allows(d.Agent, d.Tool) {
				return Decision{}, nil
			}
			may := "no tools"
			if a := p.AllowedTools(d.Agent); len(a) > 0 {
				may = strings.Join(a, ", ")
			}
			return Decision{Action: Block, Reason: fmt.Sprintf("the %s may not call %s (it may call: %s)", d.Agent, d.Tool, may)}, nil
		}}
}

// RedactSecrets removes what the redactor knows as secrets from the text the
// model sees at pt (post_tool or post_prompt), last of all hooks.
func RedactSecrets(r *tools.Redactor, pt Point) Hook {
	return Hook{Name: "redact_secrets", Point: pt, Priority: Last, Source: "builtin",
		Run: func(_ context.Context, d *Data) (Decision, error) {
			if r.Redact(d.Text) == d.Text {
				return Decision{}, nil
			}
			return Decision{RedactFunc: r.Redact}, nil
		}}
}

// SessionContext adds the session's context to the system prompt, first of
// the pre_prompt hooks.
func SessionContext(s SessionReader) Hook {
	return Hook{Name: "session_context", Point: PrePrompt, Priority: First, Source: "builtin",
		Run: func(ctx context.Context, d *Data) (Decision, error) {
			sess, err := s.Session(ctx, d.Session)
			if errors.Is(err, projections.ErrNotFound) {
				return Decision{}, nil
			}
			if err != nil {
				return Decision{}, err
			}
			return Decision{Context: describeContext(sess.Context.SessionContextSet)}, nil
		}}
}

func describeContext(c schemas.SessionContextSet) string {
	var b strings.Builder
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(&b, "- %s: %s\n", name, v)
		}
	}
	list := func(name string, vs []string) { line(name, strings.Join(vs, ", ")) }
	line("current task", c.CurrentTask)
	line("current step", c.CurrentStep)
	line("objective", c.CurrentObjective)
	list("completed steps", c.CompletedSteps)
	list("next steps", c.NextSteps)
	list("blockers", c.Blockers)
	list("files modified", c.ModifiedFiles)
	list("files created", c.CreatedFiles)
	list("files read", c.ReadFiles)
	list("the user wants", c.UserWants)
	list("the user rejects", c.UserRejects)
	if b.Len() == 0 {
		return ""
	}
	return "SESSION CONTEXT:\n" + b.String()
}

// answerEstimate is what the budget hook assumes an answer costs.
const answerEstimate = 256

// TokenBudget blocks an LLM call that would pass a token budget, late among
// the pre_prompt hooks (after those that add context).
func TokenBudget(b BudgetChecker) Hook {
	return Hook{Name: "token_budget", Point: PrePrompt, Priority: Late, Source: "builtin",
		Run: func(ctx context.Context, d *Data) (Decision, error) {
			estimate := llm.EstimateTokens(d.Messages, nil) + answerEstimate
			err := b.CheckBudget(ctx, d.Session, d.DAGID, d.NodeID, int64(estimate))
			if errors.Is(err, llm.ErrBudgetExceeded) {
				return Decision{Action: Block, Reason: err.Error()}, nil
			}
			return Decision{}, err
		}}
}

// Step0 is the seed's Step 0 (seed L14621-14766) as a pre_message hook: an
// agent with a domain (the message types it handles) does not handle a
// message outside it; it sends the Guide a reroute_request with the reason
// and the type's owner as the suggested target, and the Guide routes it
// again (or asks the user after the third reroute).
func Step0(domains map[string][]schemas.Type, owner func(schemas.Type) string) Hook {
	agents := slices.Sorted(maps.Keys(domains))
	return Hook{Name: "step0", Point: PreMessage, Priority: First, Source: "builtin", Agents: agents,
		Run: func(_ context.Context, d *Data) (Decision, error) {
			domain, ok := domains[d.Agent]
			if !ok || slices.Contains(domain, d.Message.Type) || d.Message.Type == schemas.TypeRerouteRequest {
				return Decision{}, nil
			}
			names := make([]string, len(domain))
			for i, t := range domain {
				names[i] = string(t)
			}
			reason := fmt.Sprintf("%s is not the %s's work (it handles %s)", d.Message.Type, d.Agent, strings.Join(names, ", "))
			suggest := ""
			if owner != nil {
				suggest = owner(d.Message.Type)
			}
			return Decision{Action: Block, Reason: reason, Events: []Event{{Type: schemas.TypeRerouteRequest, Target: "guide",
				Payload: schemas.RerouteRequest{Reason: reason, SuggestedTarget: suggest}}}}, nil
		}}
}
