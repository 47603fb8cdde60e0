// Package consult is direct consultation between agents (seed L2812-3026):
// an agent's model calls consult_<agent> with a question, a consult_request
// goes to that agent, which answers it with a read-only conversation of its
// own, and the consult_response comes back as the tool's result. "Direct"
// skips the Guide, never the stream: both events are recorded, the consults
// projection follows them, and the Archivalist files each consultation's
// summary as history.
//
// The rules (seed L2989-2999): the Librarian, the Archivalist and the
// Academic consult only each other; the Inspector and the Tester do not
// consult the Academic; nobody consults itself; and a consultation of an
// agent already in the chain that led to it (A asks B asks A) is a loop,
// refused. A refusal is the tool's recorded result, which the model reads.
package consult

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Agents are the agents that can be consulted.
var Agents = []string{"architect", "engineer", "inspector", "tester", "librarian", "archivalist", "academic"}

// knowledge agents consult only each other.
var knowledge = []string{"librarian", "archivalist", "academic"}

// Prefix is the prefix of the consult tools' names.
const Prefix = toolloop.ConsultPrefix

// Errors of consultations; each is wrapped with tools.ErrPermissionDenied
// too, so the tool layer records the refusal as the call's result.
var (
	ErrUnknownAgent = errors.New("consult: unknown agent")
	ErrNotAllowed   = errors.New("consult: not allowed")
	ErrLoop         = errors.New("consult: consultation loop")
)

// Defaults of Consulter.
const (
	DefaultTimeout = 2 * time.Minute
	DefaultPoll    = 50 * time.Millisecond
)

// Allowed says whether from may consult to; the error says why not.
func Allowed(from, to string) error {
	switch {
	case !slices.Contains(Agents, to):
		return fmt.Errorf("%w %q (agents: %s)", ErrUnknownAgent, to, strings.Join(Agents, ", "))
	case from == to:
		return fmt.Errorf("%w: %s cannot consult itself", ErrNotAllowed, from)
	case slices.Contains(knowledge, from) && !slices.Contains(knowledge, to):
		return fmt.Errorf("%w: the librarian, the archivalist and the academic consult only each other, not %s", ErrNotAllowed, to)
	case (from == "inspector" || from == "tester") && to == "academic":
		return fmt.Errorf("%w: the %s does not consult the academic", ErrNotAllowed, from)
	}
	return nil
}

// Answers reads consultations: *projections.Store.
type Answers interface {
	agents.Caught
	Consult(ctx context.Context, session, id string) (*projections.Consult, error)
	Consults(ctx context.Context, session string) ([]*projections.Consult, error)
}

// Consulter makes consultations for asking agents. It implements
// toolloop.Consulter.
type Consulter struct {
	Answers Answers
	// Timeout bounds a blocking consultation (default DefaultTimeout); Poll
	// is how often the answer is looked for (default DefaultPoll).
	Timeout time.Duration
	Poll    time.Duration
}

// Specs are the consult tools agent may call.
func (c *Consulter) Specs(agent string) []tools.ToolSpec {
	var out []tools.ToolSpec
	for _, to := range Agents {
		if Allowed(agent, to) != nil {
			continue
		}
		out = append(out, tools.ToolSpec{
			Name: Prefix + to,
			Description: fmt.Sprintf("Ask the %s a question directly and get its answer (it reads the project but changes nothing). "+
				"Blocking by default: the answer is this tool's result.", to),
			Parameters: json.RawMessage(`{"type": "object", "properties": {
 "question": {"type": "string", "description": "one specific question"},
 "context": {"type": "string", "description": "what the other agent needs to know to answer"},
 "blocking": {"type": "boolean", "description": "wait for the answer (default true); false asks and goes on; the answer comes in a later message once it is there"}},
 "required": ["question"], "additionalProperties": false}`),
			ReadOnly: true,
		})
	}
	return out
}

// Runner runs the consult tool named tool for the delivery d; one naming an
// unknown agent refuses, saying which agents there are. Nil for a tool that
// is not a consult tool.
func (c *Consulter) Runner(d *agents.Delivery, tool string) agents.ToolRunner {
	to, ok := strings.CutPrefix(tool, Prefix)
	if !ok {
		return nil
	}
	return &runner{c: c, d: d, to: to}
}

// runner runs one consult tool for one delivery.
type runner struct {
	c  *Consulter
	d  *agents.Delivery
	to string
}

type args struct {
	Question string `json:"question"`
	Context  string `json:"context"`
	Blocking *bool  `json:"blocking"`
}

// Chain is who asks, down the consultations that led to d, the asker last.
func Chain(d *agents.Delivery) []string {
	var chain []string
	if d.Env.Type == schemas.TypeConsultRequest {
		if p, err := schemas.PayloadAs[schemas.ConsultRequest](d.Env); err == nil {
			chain = slices.Clone(p.Chain)
		}
	}
	return append(chain, d.Agent)
}

// Run asks the question; a refusal is an error wrapping
// tools.ErrPermissionDenied, which the tool layer records as the result.
func (r *runner) Run(ctx context.Context, agent string, call tools.Call) (tools.Result, error) {
	refuse := func(err error) (tools.Result, error) {
		return tools.Result{}, fmt.Errorf("%w: %w", tools.ErrPermissionDenied, err)
	}
	var a args
	if err := json.Unmarshal(call.Args, &a); err != nil || strings.TrimSpace(a.Question) == "" {
		return tools.Result{}, fmt.Errorf("%w: %s needs a \"question\"", tools.ErrInvalidArgs, call.Tool)
	}
	if err := Allowed(agent, r.to); err != nil {
		return refuse(err)
	}
	chain := Chain(r.d)
	if slices.Contains(chain, r.to) {
		return refuse(fmt.Errorf("%w: %s -> %s: %s is already waiting on this chain; answer from what you know", ErrLoop, strings.Join(chain, " -> "), r.to, r.to))
	}
	blocking := a.Blocking == nil || *a.Blocking
	req, err := r.d.Derive(schemas.TypeConsultRequest, r.to, "consult/"+call.ID, schemas.ConsultRequest{
		Question: a.Question, Context: a.Context, Blocking: blocking, Chain: chain,
	})
	if err != nil {
		return tools.Result{}, err
	}
	seq, err := r.d.AppendNow(ctx, req)
	if err != nil {
		return tools.Result{}, err
	}
	res := tools.Result{CallID: call.ID, Tool: call.Tool, OK: true}
	if !blocking {
		res.Summary = fmt.Sprintf("asked the %s (consultation %s); its answer comes in a later message, once it is there", r.to, req.ID)
		return res, nil
	}
	c, err := r.c.wait(ctx, req.SessionID, req.ID, seq)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		res.OK, res.Error = false, fmt.Sprintf("no answer from the %s within %s (consultation %s stays open); go on without it", r.to, r.c.timeout(), req.ID)
		return res, nil
	case err != nil:
		return tools.Result{}, err
	case c.State == projections.ConsultRefused:
		res.OK, res.Error = false, fmt.Sprintf("the %s could not answer: %s", r.to, c.Refused)
		return res, nil
	}
	res.Summary = fmt.Sprintf("the %s answers:", r.to)
	res.Output = c.Answer
	return res, nil
}

// Arrived returns the answers to the non-blocking consultations asked in
// d's conversation to put into it before its model call key (step step), as
// messages: the ones recorded as put there (a replay puts them at the same
// place), and the ones settled since that are not in done, recorded now
// (consult_delivered). done holds the consultations this run of the
// conversation has been given; Arrived adds to it.
func (c *Consulter) Arrived(ctx context.Context, d *agents.Delivery, key string, step int, done map[string]bool) ([]schemas.LLMMessage, error) {
	cs, err := c.Answers.Consults(ctx, d.Env.SessionID)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	var out []schemas.LLMMessage
	for _, x := range cs {
		if x.Parent != d.Env.ID || x.Blocking || done[x.ID] {
			continue
		}
		switch {
		case x.Delivered != nil && (x.Delivered.Key != key || x.Delivered.Step != step):
			continue // put elsewhere in the conversation
		case x.Delivered == nil && x.State == projections.ConsultOpen:
			continue // not answered yet
		case x.Delivered == nil:
			env, err := d.Derive(schemas.TypeConsultDelivered, "user", "consult-delivered/"+x.ID, schemas.ConsultDelivered{RequestID: x.ID, Key: key, Step: step})
			if err != nil {
				return nil, agents.Permanent(err)
			}
			if _, err := d.AppendNow(ctx, env); err != nil {
				return nil, err
			}
		}
		done[x.ID] = true
		text := fmt.Sprintf("[The %s answers your consultation %s (%q)]\n%s", x.To, x.ID, x.Question, x.Answer)
		if x.State == projections.ConsultRefused {
			text = fmt.Sprintf("[The %s could not answer your consultation %s (%q): %s]", x.To, x.ID, x.Question, x.Refused)
		}
		out = append(out, schemas.LLMMessage{Role: "user", Content: text})
	}
	return out, nil
}

func (c *Consulter) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// wait polls the consults projection until the consultation is settled or
// the timeout passes.
func (c *Consulter) wait(ctx context.Context, session, id string, seq uint64) (*projections.Consult, error) {
	if err := c.Answers.WaitFor(ctx, seq); err != nil {
		return nil, err
	}
	poll := c.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	wctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		got, err := c.Answers.Consult(wctx, session, id)
		if err != nil && !errors.Is(err, projections.ErrNotFound) {
			return nil, err
		}
		if got != nil && got.State != projections.ConsultOpen {
			return got, nil
		}
		select {
		case <-wctx.Done():
			return nil, wctx.Err()
		case <-t.C:
		}
	}
}

// Summary is the seed's ConsultationLog line (L2942): who asked whom what,
// cut at 100 characters.
func Summary(from, to, question string) string {
	q := strings.Join(strings.Fields(question), " ")
	if r := []rune(q); len(r) > 100 {
		q = string(r[:100]) + "..."
	}
	return fmt.Sprintf("%s -> %s: %s", from, to, q)
}
