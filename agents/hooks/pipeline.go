package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// ErrBlocked is wrapped by the error of an LLM call a hook blocked.
var ErrBlocked = errors.New("blocked by a hook")

// Records finds a point's recorded decision: projections.Store. Not recorded
// is an error wrapping projections.ErrNotFound.
type Records interface {
	HookDecision(ctx context.Context, callID string) (*schemas.HookDecision, uint64, error)
}

// Pipeline runs the hooks of every point in their order. It is safe for
// concurrent use; a nil *Pipeline runs no hook.
type Pipeline struct {
	records Records
	points  atomic.Pointer[[numPoints][]*Hook] // whole sets, swapped by Replace
}

// New orders hooks by priority, ties in the order given. Hook names must be
// unique per point, and triggers are for tool points only.
func New(records Records, hooks ...Hook) (*Pipeline, error) {
	p := &Pipeline{records: records}
	var points [numPoints][]*Hook
	var errs []error
	for i := range hooks {
		h := hooks[i]
		switch {
		case !schemas.ValidName(h.Name):
			errs = append(errs, fmt.Errorf("hook %q: a name is [A-Za-z0-9_-]{1,64}", h.Name))
		case h.Point >= numPoints:
			errs = append(errs, fmt.Errorf("hook %s: %s is not a point", h.Name, h.Point))
		case h.Run == nil:
			errs = append(errs, fmt.Errorf("hook %s: nothing to run", h.Name))
		case len(h.Trigger) > 0 && !h.Point.tool():
			errs = append(errs, fmt.Errorf("hook %s: a trigger names tools, so it needs pre_tool or post_tool, not %s", h.Name, h.Point))
		case slices.ContainsFunc(points[h.Point], func(o *Hook) bool { return o.Name == h.Name }):
			errs = append(errs, fmt.Errorf("hook %s: two hooks of that name at %s", h.Name, h.Point))
		default:
			points[h.Point] = append(points[h.Point], &h)
		}
	}
	for i := range points {
		slices.SortStableFunc(points[i], func(a, b *Hook) int { return int(a.Priority) - int(b.Priority) })
	}
	p.points.Store(&points)
	return p, errors.Join(errs...)
}

// Replace makes p run q's hooks from now on: a configuration reload.
// Invocations under way finish with the hooks they began with.
func (p *Pipeline) Replace(q *Pipeline) { p.points.Store(q.points.Load()) }

// Order returns the hooks of point pt in the order they run.
func (p *Pipeline) Order(pt Point) []Hook {
	if p == nil || pt >= numPoints {
		return nil
	}
	hooks := p.points.Load()[pt]
	out := make([]Hook, len(hooks))
	for i, h := range hooks {
		out[i] = *h
	}
	return out
}

// outcome is what the hooks of one point invocation decided together.
type outcome struct {
	action  Action
	by      string
	reason  string
	context string
	args    map[string]any
	answer  string
	// text is the redacted text, when redacted.
	text     string
	redacted bool
	events   []*schemas.Envelope
}

// shown is the text the model sees in place of orig.
func (o *outcome) shown(orig string) string {
	if o.redacted {
		orig = o.text
	}
	return joinText(orig, o.context)
}

func (o *outcome) blocked() string { return fmt.Sprintf("blocked by hook %s: %s", o.by, o.reason) }

// run runs the hooks of data.Point for d's message, or reuses their recorded
// decision. key names the invocation among the delivery's (a step, a tool
// call). A nil outcome means no hook applies.
func (p *Pipeline) run(ctx context.Context, d *agents.Delivery, key string, data *Data) (*outcome, error) {
	if p == nil {
		return nil, nil
	}
	var hs []*Hook
	all := p.points.Load()[data.Point]
	for _, h := range all {
		if h.applies(d.Agent, data.Tool) {
			if hs == nil {
				hs = make([]*Hook, 0, len(all))
			}
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return nil, nil
	}
	callID := tools.CallID(d.Env.ID, d.Agent, "hook", data.Point.String(), key)
	if p.records != nil {
		rec, _, err := p.records.HookDecision(ctx, callID)
		switch {
		case err == nil:
			return reuse(d, rec)
		case !errors.Is(err, projections.ErrNotFound):
			return nil, agents.Transient(fmt.Errorf("look up the recorded hook decision %s: %w", callID, err), 0)
		}
	}
	data.Agent, data.Session, data.Message = d.Agent, d.Env.SessionID, d.Env
	out := &outcome{action: Continue, text: data.Text}
	rec := schemas.HookDecision{CallID: callID, Point: data.Point.String(), Agent: d.Agent, Tool: data.Tool}
	record := false
	var hookEvents []Event
	for _, h := range hs {
		var start time.Time
		if h.program {
			start = time.Now()
		}
		dec, err := h.call(ctx, data)
		if err == nil {
			err = dec.check(data.Point)
		}
		v := schemas.HookVerdict{Hook: h.Name, Source: h.Source}
		if h.program {
			record = true
			v.DurationMS = time.Since(start).Milliseconds()
		}
		if err != nil {
			if ctx.Err() != nil && d.Stopping() {
				// Cut off by the runner's stop: it runs again on redelivery.
				return nil, ctx.Err()
			}
			record = true
			v.Failed, dec = err.Error(), Decision{}
			v.FailMode = "open"
			if h.FailClosed {
				v.FailMode = "closed"
				if data.Point != PostMessage {
					dec = Decision{Action: Block, Reason: fmt.Sprintf("the hook failed and fails closed: %v", err)}
				}
			}
		}
		if dec.changes() {
			record = true
		}
		v.Decision, v.Reason = string(orContinue(dec.Action)), dec.Reason
		rec.Hooks = append(rec.Hooks, v)
		out.apply(h.Name, data, &dec)
		hookEvents = append(hookEvents, dec.Events...)
		if out.action != Continue {
			break
		}
	}
	if !record {
		return out, nil
	}
	for i, e := range hookEvents {
		payload, err := schemas.EncodePayload(e.Type, e.Payload)
		if err != nil {
			return nil, agents.Permanent(fmt.Errorf("hook event %d at %s: %w", i, data.Point, err))
		}
		rec.Events = append(rec.Events, schemas.HookEvent{Type: e.Type, Target: e.Target, Key: fmt.Sprintf("hook/%s/%d", callID, i), Payload: payload})
	}
	rec.Action, rec.By, rec.Reason, rec.Context, rec.Answer = string(out.action), out.by, out.reason, out.context, out.answer
	if out.args != nil {
		b, err := json.Marshal(out.args)
		if err != nil {
			return nil, agents.Permanent(fmt.Errorf("hook arguments at %s: %w", data.Point, err))
		}
		rec.Args = string(b)
	}
	if out.redacted {
		rec.Redacted, rec.Text = true, out.text
	}
	env, err := d.Derive(schemas.TypeHookDecision, "user", "hook/"+callID, rec)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if _, err := d.AppendNow(context.WithoutCancel(ctx), env); err != nil {
		return nil, err
	}
	return reuse(d, &rec)
}

func orContinue(a Action) Action {
	if a == "" {
		return Continue
	}
	return a
}

// apply folds one hook's decision into the outcome and the data later hooks
// see.
func (o *outcome) apply(name string, data *Data, dec *Decision) {
	if dec.Args != nil {
		o.args, data.Args = dec.Args, dec.Args
	}
	if dec.Context != "" {
		o.context = strings.TrimSpace(o.context + "\n" + dec.Context)
	}
	if len(dec.Redact) > 0 || dec.RedactFunc != nil {
		o.text, o.redacted = redact(o.text, dec), true
		data.Text = o.text
	}
	switch dec.Action {
	case Block:
		o.action, o.by, o.reason = Block, name, dec.Reason
	case Answer:
		o.action, o.by, o.answer = Answer, name, dec.Answer
	}
}

func redact(s string, dec *Decision) string {
	for _, secret := range dec.Redact {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[REDACTED]")
		}
	}
	if dec.RedactFunc != nil {
		s = dec.RedactFunc(s)
	}
	return s
}

// reuse turns a recorded decision into the outcome, its events derived again
// under the same ids.
func reuse(d *agents.Delivery, rec *schemas.HookDecision) (*outcome, error) {
	out := &outcome{action: Action(rec.Action), by: rec.By, reason: rec.Reason, context: rec.Context, answer: rec.Answer, text: rec.Text, redacted: rec.Redacted}
	if rec.Args != "" {
		if err := json.Unmarshal([]byte(rec.Args), &out.args); err != nil {
			return nil, agents.Permanent(fmt.Errorf("recorded hook arguments of %s: %w", rec.CallID, err))
		}
	}
	for _, e := range rec.Events {
		payload, err := schemas.DecodePayload(&schemas.Envelope{Type: e.Type, Payload: e.Payload})
		if err != nil {
			return nil, agents.Permanent(fmt.Errorf("recorded hook event of %s: %w", rec.CallID, err))
		}
		env, err := d.Derive(e.Type, e.Target, e.Key, payload)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		out.events = append(out.events, env)
	}
	return out, nil
}

// PreMessage runs the pre_message hooks: agents.MessageHooks. A message a
// hook blocks is not handled. Unless the hook appended events in its stead
// (Step 0's reroute_request), the user is told why: whoever waits for its
// outcome (a 'sylk run') would otherwise wait for ever.
func (p *Pipeline) PreMessage(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, bool, error) {
	out, err := p.run(ctx, d, "message", &Data{Point: PreMessage})
	if err != nil || out == nil {
		return nil, err == nil, err
	}
	if out.action != Block || len(out.events) > 0 {
		return out.events, out.action == Continue, nil
	}
	n, err := d.Derive(schemas.TypeNotice, "user", "hook-blocked", schemas.Notice{Level: schemas.NoticeError,
		Text: fmt.Sprintf("%s not handled: %s", d.Env.Type, out.blocked()), Hint: "sylk hook ls lists the hooks; the config's hooks: section changes them"})
	if err != nil {
		return nil, false, err
	}
	return append(out.events, n), false, nil
}

// PostMessage runs the post_message hooks: agents.MessageHooks.
func (p *Pipeline) PostMessage(ctx context.Context, d *agents.Delivery, outs []*schemas.Envelope) ([]*schemas.Envelope, error) {
	out, err := p.run(ctx, d, "message", &Data{Point: PostMessage, Outputs: outs})
	if err != nil || out == nil {
		return outs, err
	}
	return append(outs, out.events...), nil
}

// Task names the task a call belongs to.
type Task struct{ DAGID, NodeID string }

// Prompt makes an LLM call between the pre_prompt and post_prompt hooks:
// call gets the conversation with the hooks' context added to its system
// message, unless a hook blocked (an error wrapping ErrBlocked, permanent)
// or answered (the answer is the response; nothing is called). key names
// the call among the delivery's. The post_prompt hooks may redact the
// answer's content or add to it, or block it.
func (p *Pipeline) Prompt(ctx context.Context, d *agents.Delivery, key string, task Task, msgs []schemas.LLMMessage,
	call func(ctx context.Context, msgs []schemas.LLMMessage) (schemas.LLMResponse, error)) (schemas.LLMResponse, error) {
	pre, err := p.run(ctx, d, key, &Data{Point: PrePrompt, Messages: msgs, DAGID: task.DAGID, NodeID: task.NodeID})
	if err != nil {
		return schemas.LLMResponse{}, err
	}
	var resp schemas.LLMResponse
	switch {
	case pre != nil && pre.action == Block:
		d.Emit(pre.events...)
		return resp, agents.Permanent(fmt.Errorf("%w: %s", ErrBlocked, pre.blocked()))
	case pre != nil && pre.action == Answer:
		resp = schemas.LLMResponse{Content: pre.answer, FinishReason: "stop"}
	default:
		if pre != nil && pre.context != "" && len(msgs) > 0 {
			msgs = slices.Clone(msgs)
			msgs[0].Content += "\n\n" + pre.context
		}
		if resp, err = call(ctx, msgs); err != nil {
			return resp, err
		}
	}
	if pre != nil {
		d.Emit(pre.events...)
	}
	post, err := p.run(ctx, d, key, &Data{Point: PostPrompt, Response: &resp, Text: resp.Content, DAGID: task.DAGID, NodeID: task.NodeID})
	if err != nil || post == nil {
		return resp, err
	}
	d.Emit(post.events...)
	if post.action == Block {
		return resp, agents.Permanent(fmt.Errorf("%w: %s", ErrBlocked, post.blocked()))
	}
	resp.Content = post.shown(resp.Content)
	return resp, nil
}

// Tool runs a tool call between the pre_tool and post_tool hooks. run is
// called with the arguments the hooks left, unless a hook blocked (the
// result is a failure whose error is the hook's reason) or answered (a
// success whose output is the answer); show renders a result as the text the
// model sees, which the post_tool hooks may redact, add to or replace with a
// reason. It returns the result and that text.
func (p *Pipeline) Tool(ctx context.Context, d *agents.Delivery, key string, task Task, tool string, args map[string]any,
	run func(ctx context.Context, args map[string]any) (schemas.ToolResult, error), show func(schemas.ToolResult) string) (schemas.ToolResult, string, error) {
	pre, err := p.run(ctx, d, key, &Data{Point: PreTool, Tool: tool, Args: args, DAGID: task.DAGID, NodeID: task.NodeID})
	if err != nil {
		return schemas.ToolResult{}, "", err
	}
	var res schemas.ToolResult
	switch {
	case pre != nil && pre.action == Block:
		res = schemas.ToolResult{Tool: tool, ExitCode: -1, Error: pre.blocked()}
	case pre != nil && pre.action == Answer:
		res = schemas.ToolResult{Tool: tool, OK: true, Output: pre.answer, Summary: "answered by hook " + pre.by}
	default:
		if pre != nil && pre.args != nil {
			args = pre.args
		}
		if res, err = run(ctx, args); err != nil {
			return res, "", err
		}
	}
	if pre != nil {
		d.Emit(pre.events...)
		if pre.context != "" {
			res.Summary = joinText(res.Summary, pre.context)
		}
	}
	text := show(res)
	post, err := p.run(ctx, d, key, &Data{Point: PostTool, Tool: tool, Args: args, Result: &res, Text: text, DAGID: task.DAGID, NodeID: task.NodeID})
	if err != nil || post == nil {
		return res, text, err
	}
	d.Emit(post.events...)
	if post.action == Block {
		return res, post.blocked(), nil
	}
	return res, post.shown(text), nil
}

func joinText(text, context string) string {
	if context == "" {
		return text
	}
	if text == "" {
		return context
	}
	return text + "\n" + context
}
