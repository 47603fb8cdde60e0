package consult

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/planguard"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Sessions gives a session's work directory: *projections.Store.
type Sessions interface {
	Session(ctx context.Context, id string) (*projections.Session, error)
}

// Responder answers the consultations addressed to an agent: a read-only
// conversation of that agent with the model (its read-only tools, and its
// own consult tools, so a chain can go on), recorded like every other, whose
// answer is the consult_response.
type Responder struct {
	// LLM is nil when none is configured: consultations are refused, saying so.
	LLM       toolloop.LLM
	Executors *worker.Executors
	Records   agents.ToolRecords
	Sessions  Sessions
	Consult   toolloop.Consulter
	// Steps bounds the model calls of one answer (default
	// toolloop.DefaultSteps).
	Steps int
}

// Wrap makes next answer consultations too: a consult_request is answered
// by r, everything else goes to next. With no next (an agent that only
// answers consultations) a consult_response needs nothing (the asker read it
// from the projection) and anything else is not handled.
func Wrap(agent string, next agents.Handler, r *Responder) agents.Handler {
	return agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		switch {
		case d.Env.Type == schemas.TypeConsultRequest:
			return r.Handle(ctx, d)
		case next != nil:
			return next.Handle(ctx, d)
		case d.Env.Type == schemas.TypeConsultResponse:
			return nil, nil
		}
		return nil, agents.Unhandled(agent, d.Env.Type)
	})
}

// Handle answers one consult_request.
func (r *Responder) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.ConsultRequest](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	resp := schemas.ConsultResponse{RequestID: d.Env.ID, Summary: Summary(d.Env.Source, d.Agent, p.Question)}
	answer, err := r.answer(ctx, d, p)
	switch {
	case err == nil:
		resp.Answer = answer
	case errors.Is(err, errRefused):
		resp.Refused = strings.TrimPrefix(err.Error(), errRefused.Error()+": ")
	default:
		if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
			return nil, err // the redelivery replays the recorded calls
		}
		resp.Refused = err.Error()
	}
	out, err := d.Derive(schemas.TypeConsultResponse, d.Env.Source, "consult-response", resp)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{out}, nil
}

var errRefused = errors.New("refused")

func (r *Responder) answer(ctx context.Context, d *agents.Delivery, p *schemas.ConsultRequest) (string, error) {
	if r.LLM == nil {
		return "", fmt.Errorf("%w: answering needs an LLM: %w", errRefused, llm.ErrNotConfigured)
	}
	workDir := ""
	if s, err := r.Sessions.Session(ctx, d.Env.SessionID); err == nil {
		workDir = s.Config.WorkDir
	}
	exec, err := r.Executors.For(workDir)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errRefused, err)
	}
	var specs []tools.ToolSpec
	for _, s := range exec.SchemasFor(d.Agent) {
		if s.ReadOnly {
			specs = append(specs, s)
		}
	}
	loop := &toolloop.Loop{LLM: r.LLM, Records: r.Records, Runner: planguard.ReadOnly(exec, "answering a consultation"),
		Specs: specs, Key: "consult", Steps: r.Steps}
	if r.Consult != nil {
		loop.Specs = append(loop.Specs, r.Consult.Specs(d.Agent)...)
		loop.Consult = r.Consult
	}
	user := fmt.Sprintf("The %s asks you: %s", d.Env.Source, p.Question)
	if p.Context != "" {
		user += "\n\nContext: " + p.Context
	}
	msgs := []schemas.LLMMessage{{Role: "system", Content: system(d.Agent)}, {Role: "user", Content: user}}
	text, _, err := loop.Run(ctx, d, msgs, func(content string) string {
		if strings.TrimSpace(content) == "" {
			return "Answer the question in plain text."
		}
		return ""
	})
	return strings.TrimSpace(text), err
}

func system(agent string) string {
	return fmt.Sprintf("You are the %s of Sylk, a multi-agent runtime. Another agent consults you directly. "+
		"Answer its question concisely and concretely, from evidence: read the project with your tools (you change nothing), "+
		"and say when you do not know. Reply with the answer in plain text, without a tool call, once you have it.", agent)
}
