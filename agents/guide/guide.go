// Package guide is the Guide: it routes every unaddressed message. Deterministic
// routes (a message type with one owner, a slash command) need no LLM; natural
// language goes to a Classifier when one is configured, and otherwise gets a
// notice saying what is needed. Reroutes are bounded: the third reroute of a
// request goes to the user, not to another agent (seed L676-708).
package guide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Name is the Guide's agent name; unaddressed events are addressed to it.
const Name = "guide"

// MaxReroutes is how many reroutes a request may have before the user decides.
const MaxReroutes = 3

// State is what the Guide reads from the projections.
type State interface {
	// Caught waits until the projections have applied a stream sequence:
	// the Guide reads them only once they hold the message it handles, and
	// so everything before it (the question an answer replies to).
	agents.Caught
	// Status describes a session for /status and /tasks: its state, its DAGs and
	// their progress, and what waits on the user.
	Status(ctx context.Context, session string) (string, error)
	// Sessions describes every session for /session list.
	Sessions(ctx context.Context) (string, error)
	// Event returns an event of a session by id.
	Event(ctx context.Context, session, id string) (*schemas.Envelope, error)
	// Asker returns the agent waiting for the answer to the request with this
	// id or correlation id (a clarification, a plan), if any.
	Asker(ctx context.Context, session, id string) (string, bool)
	// PlanMode is the session's plan mode once the projections have applied
	// seq; nil when the session never entered it.
	PlanMode(ctx context.Context, session string, seq uint64) (*projections.PlanMode, error)
	// PlanWaits reports whether the plan planID waits for the user's answer.
	PlanWaits(ctx context.Context, session, planID string) bool
}

// Classifier turns natural language into a routed message: the LLM tier.
type Classifier interface {
	Classify(ctx context.Context, d *agents.Delivery, text string) ([]*schemas.Envelope, error)
}

// Guide routes messages.
type Guide struct {
	State State
	// Classifier is nil when no LLM is configured.
	Classifier Classifier
	// LLMHint tells the user how to configure an LLM.
	LLMHint string
	// Routes override entries of the routing table: a message type to the
	// agent that owns it (CheckRoutes checks them).
	Routes map[schemas.Type]string
}

// routes is the deterministic routing table: message type to owner (seed
// L140-196, L2026-2043). Types not here and not special go to the user.
var routes = map[schemas.Type]string{
	schemas.TypeResearchRequest:            "academic",
	schemas.TypeDomainExpectationsRequest:  "academic",
	schemas.TypeContextRequest:             "librarian",
	schemas.TypeHistoryRequest:             "archivalist",
	schemas.TypeStoreRequest:               "archivalist",
	schemas.TypePlanRequest:                "architect",
	schemas.TypePlanApproved:               "architect",
	schemas.TypePlanModified:               "architect",
	schemas.TypePlanEnter:                  "architect",
	schemas.TypePlanExit:                   "architect",
	schemas.TypeDAGStatus:                  "architect",
	schemas.TypeValidationCorrections:      "architect",
	schemas.TypeTestDAGRequest:             "architect",
	schemas.TypeTestCorrections:            "architect",
	schemas.TypeUserInterrupt:              "architect",
	schemas.TypeDomainExpectationsResponse: "architect",
	schemas.TypeDAGExecute:                 "orchestrator",
	schemas.TypeTaskComplete:               "orchestrator",
	schemas.TypeTaskFailed:                 "orchestrator",
	schemas.TypeTaskHelp:                   "orchestrator",
	schemas.TypeValidationResult:           "orchestrator",
	schemas.TypeSignal:                     "orchestrator",
	schemas.TypeTaskDispatch:               "engineer",
	schemas.TypeValidateTask:               "inspector",
	schemas.TypeUserOverride:               "inspector",
	schemas.TypeTestPlanRequest:            "tester",
	schemas.TypeTestsReady:                 "tester",
}

// Owner is the agent that handles messages of type t by the routing table,
// "" when no single agent does.
func Owner(t schemas.Type) string { return routes[t] }

// CheckRoutes checks overrides of the routing table: each a message type the
// table routes, to an agent it routes to.
func CheckRoutes(r map[schemas.Type]string) error {
	types, owners := []string{}, []string{}
	for t, a := range routes {
		types = append(types, string(t))
		if !slices.Contains(owners, a) {
			owners = append(owners, a)
		}
	}
	slices.Sort(types)
	slices.Sort(owners)
	for _, t := range slices.Sorted(maps.Keys(r)) {
		switch {
		case routes[t] == "":
			return fmt.Errorf("routes: %q is not a type the Guide routes by type (those are %s)", t, strings.Join(types, ", "))
		case !slices.Contains(owners, r[t]):
			return fmt.Errorf("routes: %s -> %q: want one of the agents %s", t, r[t], strings.Join(owners, ", "))
		}
	}
	return nil
}

// replies go back to whoever sent the request they answer (seed I3).
var replies = map[schemas.Type]bool{
	schemas.TypeResearchResponse: true, schemas.TypeContextResponse: true, schemas.TypeHistoryResponse: true,
	schemas.TypeConsultResponse: true, schemas.TypeUserResponse: true, schemas.TypeClarificationResponse: true,
}

// sessionEvents change sessions; the projection applies them wherever they are
// addressed, so the Guide has nothing to route.
var sessionEvents = map[schemas.Type]bool{
	schemas.TypeSessionCreate: true, schemas.TypeSessionSwitch: true, schemas.TypeSessionSuspend: true,
	schemas.TypeSessionResume: true, schemas.TypeSessionComplete: true, schemas.TypeSessionFail: true,
	schemas.TypeSessionContextSet: true,
}

// Handle routes one message.
func (g *Guide) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	env := d.Env
	switch {
	case env.Type == schemas.TypeUserInput:
		p, err := schemas.PayloadAs[schemas.UserInput](env)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		return g.userInput(ctx, d, strings.TrimSpace(p.Text))
	case env.Type == schemas.TypeRerouteRequest:
		return g.reroute(ctx, d)
	case sessionEvents[env.Type]:
		return nil, nil
	case replies[env.Type]:
		return g.reply(ctx, d)
	}
	target, ok := g.Routes[env.Type]
	if !ok {
		target, ok = routes[env.Type]
	}
	if !ok {
		target = "user"
	}
	out, err := one(route(d, env, target, "route"))
	if err != nil || (env.Type != schemas.TypePlanApproved && env.Type != schemas.TypePlanModified) {
		return out, err
	}
	released, err := g.release(ctx, d)
	return append(out, released...), err
}

// hold keeps a message typed while a plan awaits approval (seed L36900-36972:
// the Guide routes nothing else then): the plans projection holds it, and the
// user is told. It reports whether it held it.
func (g *Guide) hold(ctx context.Context, d *agents.Delivery, text string) ([]*schemas.Envelope, bool, error) {
	if g.State == nil || !projections.HoldsInput(text) {
		return nil, false, nil
	}
	pm, err := g.State.PlanMode(ctx, d.Env.SessionID, d.Seq)
	if err != nil {
		return nil, false, agents.Transient(err, 0)
	}
	if pm == nil || pm.State != schemas.PlanAwaitingApproval || d.Env.ParentID != "" && d.Env.Metadata[MetaReleased] != "" {
		return nil, false, nil
	}
	out, err := notice(d, "held", schemas.NoticeInfo,
		fmt.Sprintf("plan %s (v%d) waits for your approval; your message is held and handled once you settle the plan", pm.PlanID, pm.Version),
		"sylk plan show; sylk plan approve | modify \"...\" | reject (or /approve "+pm.PlanID+")")
	return out, true, err
}

// MetaReleased marks a held message the Guide released once the plan was
// settled; its value is the plan.
const MetaReleased = "released_from_hold"

// release hands the messages held while a plan awaited approval back to the
// Guide, now that the user answered: copies with the held message as parent.
func (g *Guide) release(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	if g.State == nil {
		return nil, nil
	}
	pm, err := g.State.PlanMode(ctx, d.Env.SessionID, d.Seq)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	if pm == nil {
		return nil, nil
	}
	var out []*schemas.Envelope
	for _, h := range pm.Held {
		e, err := d.Derive(schemas.TypeUserInput, Name, "release/"+h.ID, schemas.UserInput{Text: h.Text})
		if err != nil {
			return nil, agents.Permanent(err)
		}
		// The held message's own request, not the plan's.
		e.Source, e.ParentID, e.CorrelationID = "user", h.ID, h.ID
		e.Metadata = map[string]string{MetaReleased: pm.PlanID}
		out = append(out, e)
	}
	return out, nil
}

// route is a copy of the message addressed to target: a new id, parent_id =
// the original, everything else kept.
func route(d *agents.Delivery, orig *schemas.Envelope, target, key string) (*schemas.Envelope, error) {
	cp := *orig
	cp.ID = schemas.DeriveID(orig, Name+"/"+key)
	cp.ParentID = orig.ID
	cp.Target = target
	cp.Timestamp = d.Now()
	cp.Metadata = map[string]string{agents.MetaRoutedBy: Name}
	for k, v := range orig.Metadata {
		cp.Metadata[k] = v
	}
	cp.ConfidenceChain = append([]schemas.ConfidenceEntry(nil), orig.ConfidenceChain...)
	cp.RerouteHistory = append([]schemas.RerouteHop(nil), orig.RerouteHistory...)
	return &cp, nil
}

func one(e *schemas.Envelope, err error) ([]*schemas.Envelope, error) {
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{e}, nil
}

func notice(d *agents.Delivery, key, level, text, hint string) ([]*schemas.Envelope, error) {
	return one(d.Derive(schemas.TypeNotice, "user", key, schemas.Notice{Level: level, Text: text, Hint: hint}))
}

// reply routes an answer back to whoever is waiting for it: the asker of a
// pending clarification or plan, else the sender of the request it answers.
func (g *Guide) reply(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	if err := g.caughtUp(ctx, d); err != nil {
		return nil, err
	}
	env := d.Env
	inReplyTo := env.ParentID
	switch env.Type {
	case schemas.TypeClarificationResponse:
		if p, err := schemas.PayloadAs[schemas.ClarificationResponse](env); err == nil && p.InReplyTo != "" {
			inReplyTo = p.InReplyTo
		}
	case schemas.TypeUserResponse:
		if p, err := schemas.PayloadAs[schemas.UserResponse](env); err == nil && p.InReplyTo != "" {
			inReplyTo = p.InReplyTo
		}
	}
	for _, id := range []string{inReplyTo, env.CorrelationID} {
		if id == "" {
			continue
		}
		if asker, ok := g.State.Asker(ctx, env.SessionID, id); ok {
			return one(route(d, env, asker, "reply"))
		}
	}
	if inReplyTo != "" {
		req, err := g.State.Event(ctx, env.SessionID, inReplyTo)
		if err == nil && req.Source != "user" {
			return one(route(d, env, req.Source, "reply"))
		}
	}
	return notice(d, "unrouted-reply", schemas.NoticeWarn,
		fmt.Sprintf("nobody is waiting for this %s (in reply to %q)", env.Type, inReplyTo),
		"answer a pending question: 'sylk session show "+env.SessionID+"' lists what waits on you")
}

// caughtUp waits until the projections hold the delivered message. The
// events it follows from are in the stream before it, but the projector may
// not have folded them yet: an answer read too early finds no question
// waiting for it.
func (g *Guide) caughtUp(ctx context.Context, d *agents.Delivery) error {
	if err := g.State.WaitFor(ctx, d.Seq); err != nil {
		return agents.Transient(err, 0)
	}
	return nil
}

// reroute handles an agent's rejection of a request as outside its domain.
func (g *Guide) reroute(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	env := d.Env
	p, err := schemas.PayloadAs[schemas.RerouteRequest](env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if err := g.caughtUp(ctx, d); err != nil {
		return nil, err
	}
	orig, err := g.State.Event(ctx, env.SessionID, env.ParentID)
	if err != nil {
		return nil, agents.Transient(fmt.Errorf("reroute: the rejected request %s: %w", env.ParentID, err), 0)
	}
	history := append(append([]schemas.RerouteHop(nil), orig.RerouteHistory...), schemas.RerouteHop{From: env.Source, Reason: p.Reason, To: p.SuggestedTarget})
	if len(history) >= MaxReroutes || p.SuggestedTarget == "" || p.SuggestedTarget == env.Source {
		return g.askUser(d, orig, history)
	}
	out, err := route(d, orig, p.SuggestedTarget, "reroute")
	if err != nil {
		return nil, agents.Permanent(err)
	}
	out.ParentID = env.ID
	out.RerouteHistory = history
	return []*schemas.Envelope{out}, nil
}

// askUser stops the ping-pong: the user sees the original request, every hop
// and its reason, and chooses.
func (g *Guide) askUser(d *agents.Delivery, orig *schemas.Envelope, history []schemas.RerouteHop) ([]*schemas.Envelope, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "No agent took this request after %d reroutes:\n", len(history))
	for i, h := range history {
		fmt.Fprintf(&b, "  %d. %s -> %s: %s\n", i+1, h.From, orDash(h.To), h.Reason)
	}
	q := schemas.ClarificationRequest{
		Question: b.String() + "Who should handle it?",
		Options: []string{
			"A: send it to an agent you name",
			"B: rephrase or split the request",
			"C: drop it",
		},
		Context: requestText(orig),
		Asker:   Name,
	}
	out, err := d.Derive(schemas.TypeClarificationRequest, "user", "reroute-limit", q)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	out.RerouteHistory = history
	return []*schemas.Envelope{out}, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// requestText is what the user is shown of a request: its original words, or
// its payload.
func requestText(env *schemas.Envelope) string {
	if env.StructuredIntent != nil {
		return env.StructuredIntent.OriginalRequest
	}
	if p, err := schemas.DecodePayload(env); err == nil {
		if b, err := json.Marshal(p); err == nil {
			return fmt.Sprintf("%s %s", env.Type, b)
		}
	}
	return fmt.Sprintf("%s %s", env.Type, env.ID)
}

// ErrNoLLM is the reason natural language cannot be handled without an LLM.
var ErrNoLLM = errors.New("no LLM is configured")
