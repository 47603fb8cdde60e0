// Package permit decides the tool actions that fall outside an agent's
// allow-list, in the seed's order (L12204-12306): the role check, the safe
// list, the project allow-list, then the user.
//
// The role check is the agent's tool allow-list (tools.Policy, the
// permission_check hook): a tool the agent may not use is denied before this
// package is asked. Every exec command of every agent is then allowed when it
// is on the safe list (read-only inspection, git reads, builds and tests), on
// the project's allow-list for the agent (tools.AgentPolicy.Commands, the
// config's commands:), or when a remembered answer covers it (a decision for
// the session or always, the permits projection); otherwise a
// permission_request event asks the user, and the agent waits for the
// permission_decision that `sylk permit allow|deny` appends. An agent with no
// command list is no exception: it asks about whatever is off the safe list.
// The request's id is derived from the message and the call, so a redelivered
// message finds its request (and its answer) instead of asking again.
package permit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// SafeCommands are the commands allowed without asking (seed L12163-12189):
// each entry is matched as tools.AgentPolicy.Commands are, by its words.
var SafeCommands = []string{
	"ls", "cat", "head", "tail", "find", "grep", "rg", "fd", "wc", "file", "stat", "which",
	"git status", "git diff", "git log", "git show", "git branch",
	"go vet", "go fmt", "gofmt", "npm list", "npm outdated", "python -m py_compile",
	"make", "go build", "go test", "npm test", "npm run build", "cargo build", "cargo test",
}

// DefaultPoll is how often a waiting agent looks for the user's decision.
const DefaultPoll = 200 * time.Millisecond

// Reader reads the permits projection: projections.Store.
type Reader interface {
	Permit(ctx context.Context, id string) (*projections.Permit, error)
	PermitGrant(ctx context.Context, session, action, grant string) (*projections.PermitGrant, error)
}

// Sources of a decision.
const (
	SourceAllowList = "allow_list"
	SourceSafeList  = "safe_list"
	SourceRemember  = "remembered"
	SourceUser      = "user"
)

// Decision is the gate's answer for one call.
type Decision struct {
	Allowed bool
	// Source says what decided: SourceAllowList, SourceSafeList,
	// SourceRemember or SourceUser.
	Source string
	// Request is the permission request's id when the user was asked or a
	// remembered answer was used.
	Request string
	// Target is the command as the user was (or would be) asked about it.
	Target string
	// Reason says why a call was denied, for the model.
	Reason string
}

// Gate decides the exec calls of the agents' prompt loops.
type Gate struct {
	Policy tools.Policy
	// Safe is the safe list (nil: SafeCommands).
	Safe  []string
	Store Reader
	// Poll is how often a waiting call looks for the decision (0:
	// DefaultPoll).
	Poll time.Duration
}

// Exec decides an exec call of d's agent, asking the user when nothing else
// allows it. key names the call among the message's (its derived request id
// depends on it). It waits for the user until ctx ends; an error is a
// failure to record or read, never a denial.
func (g *Gate) Exec(ctx context.Context, d *agents.Delivery, key string, call tools.Call, where agents.ToolWhere) (Decision, error) {
	var a struct {
		Argv    []string `json:"argv"`
		Command string   `json:"command"`
		Shell   bool     `json:"shell"`
	}
	if err := jsonArgs(call.Args, &a); err != nil || (len(a.Argv) == 0 && !a.Shell) {
		// The executor refuses malformed arguments with the reason.
		return Decision{Allowed: true, Source: SourceAllowList}, nil
	}
	if !a.Shell {
		safe := g.Safe
		if safe == nil {
			safe = SafeCommands
		}
		p := tools.Policy{Agents: map[string]tools.AgentPolicy{d.Agent: {Commands: safe}}}
		if p.AllowsCommand(d.Agent, a.Argv, false) == nil {
			return Decision{Allowed: true, Source: SourceSafeList}, nil
		}
	}
	target, grant := strings.Join(a.Argv, " "), ""
	if a.Shell {
		target, grant = a.Command, a.Command
	} else {
		grant = filepath.Base(a.Argv[0])
	}
	// An empty list allows nothing here: AllowsCommand's "any command" is
	// the executor's view, once this gate has decided.
	reason := fmt.Sprintf("%q is not on the safe list and agent %q has no commands: list in the configuration", target, d.Agent)
	if len(g.Policy.Agents[d.Agent].Commands) > 0 {
		refusal := g.Policy.AllowsCommand(d.Agent, a.Argv, a.Shell)
		if refusal == nil {
			return Decision{Allowed: true, Source: SourceAllowList}, nil
		}
		reason = unwrapReason(refusal)
	}
	switch rem, err := g.Store.PermitGrant(ctx, d.Env.SessionID, schemas.ActionCommand, grant); {
	case err == nil:
		return answer(rem.Allow, SourceRemember, rem.RequestID, target, fmt.Sprintf("the user denied %q (%s)", grant, rem.Scope)), nil
	case !errors.Is(err, projections.ErrNotFound):
		return Decision{}, agents.Transient(fmt.Errorf("permit: read the remembered answers: %w", err), 0)
	}
	req, err := d.Derive(schemas.TypePermissionRequest, "user", "permit/"+key, schemas.PermissionRequest{
		Agent: d.Agent, Tool: call.Tool, Action: schemas.ActionCommand, Target: target, Grant: grant,
		Reason: reason, CallID: call.ID, DAGID: where.DAGID, NodeID: where.NodeID, Attempt: where.Attempt,
	})
	if err != nil {
		return Decision{}, agents.Permanent(err)
	}
	if _, err := d.AppendNow(ctx, req); err != nil {
		return Decision{}, err
	}
	p, err := g.wait(ctx, req.ID)
	if err != nil {
		return Decision{}, err
	}
	denied := fmt.Sprintf("the user denied %q", target)
	if p.DecisionReason != "" {
		denied += ": " + p.DecisionReason
	}
	return answer(p.State == projections.PermitAllowed, SourceUser, p.ID, target, denied), nil
}

// wait polls the projection until the request is decided or ctx ends.
func (g *Gate) wait(ctx context.Context, id string) (*projections.Permit, error) {
	poll := g.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		p, err := g.Store.Permit(ctx, id)
		switch {
		case err == nil && p.State != projections.PermitOpen:
			return p, nil
		case err != nil && !errors.Is(err, projections.ErrNotFound):
			return nil, agents.Transient(fmt.Errorf("permit: read request %s: %w", id, err), 0)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("permit: no decision on request %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

func answer(allowed bool, source, request, target, reason string) Decision {
	d := Decision{Allowed: allowed, Source: source, Request: request, Target: target}
	if !allowed {
		d.Reason = reason
	}
	return d
}

// unwrapReason is the policy's refusal without the package's error prefix.
func unwrapReason(err error) string {
	return strings.TrimPrefix(err.Error(), tools.ErrPermissionDenied.Error()+": ")
}

func jsonArgs(raw []byte, v any) error {
	if len(raw) == 0 {
		return errors.New("no arguments")
	}
	return json.Unmarshal(raw, v)
}
