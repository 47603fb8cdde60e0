package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Defaults of a user hook.
const (
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = 5 * time.Minute
)

// Config declares a user hook: the `hooks:` list of the configuration.
//
//	hooks:
//	  - name: no-rm
//	    point: pre_tool
//	    trigger: [exec]
//	    priority: early
//	    command: [.sylk/hooks/no-rm.sh]
//	    timeout: 5s
//	    fail: closed
type Config struct {
	Name  string `yaml:"name" json:"name"`
	Point string `yaml:"point" json:"point"`
	// Trigger limits a tool point's hook to these tools.
	Trigger []string `yaml:"trigger,omitempty" json:"trigger,omitempty"`
	// Agents limits the hook to these agents.
	Agents []string `yaml:"agents,omitempty" json:"agents,omitempty"`
	// Priority is first, early, normal (the default), late, last or 0-100.
	Priority string `yaml:"priority,omitempty" json:"priority,omitempty"`
	// Command is the program and its arguments, run in the project
	// directory.
	Command []string `yaml:"command" json:"command"`
	// Timeout is a Go duration (default 10s, at most 5m): the program is
	// killed when it is reached.
	Timeout string `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Fail is open (the default: a failed hook lets the call go on) or
	// closed (it blocks the call).
	Fail string `yaml:"fail,omitempty" json:"fail,omitempty"`
}

// Programs runs user hooks' programs: *tools.Executor.
type Programs interface {
	RunProgram(ctx context.Context, p tools.Program) (tools.ProgramResult, error)
}

// FromConfig turns the configuration's hooks into Hooks whose programs run
// through progs. Every problem of every hook is reported at once, naming the
// hook by its index and the key.
func FromConfig(cfgs []Config, progs Programs) ([]Hook, error) {
	var out []Hook
	var errs []error
	for i, c := range cfgs {
		bad := func(key, format string, args ...any) {
			errs = append(errs, fmt.Errorf("hooks[%d] (%s): %s: %s", i, c.Name, key, fmt.Sprintf(format, args...)))
		}
		if !schemas.ValidName(c.Name) {
			bad("name", "%q is not a name ([A-Za-z0-9_-]{1,64})", c.Name)
		}
		pt, err := ParsePoint(c.Point)
		if err != nil {
			bad("point", "%v", err)
		}
		if len(c.Trigger) > 0 && err == nil && !pt.tool() {
			bad("trigger", "names tools, so the point must be pre_tool or post_tool, not %s", c.Point)
		}
		prio := Normal
		if c.Priority != "" {
			if prio, err = ParsePriority(c.Priority); err != nil {
				bad("priority", "%v", err)
			}
		}
		if len(c.Command) == 0 || c.Command[0] == "" {
			bad("command", "the program to run is missing, e.g. [.sylk/hooks/check.sh]")
		}
		timeout := DefaultTimeout
		if c.Timeout != "" {
			if timeout, err = time.ParseDuration(c.Timeout); err != nil || timeout <= 0 || timeout > MaxTimeout {
				bad("timeout", "%q is not a duration between 0 and %s (e.g. 5s)", c.Timeout, MaxTimeout)
			}
		}
		closed := false
		switch c.Fail {
		case "", "open":
		case "closed":
			closed = true
		default:
			bad("fail", "%q is neither open nor closed", c.Fail)
		}
		h := Hook{Name: c.Name, Point: pt, Priority: prio, Trigger: c.Trigger, Agents: c.Agents, Source: "config",
			FailClosed: closed, Command: c.Command, Timeout: timeout, program: true}
		h.Run = programFunc(progs, h.Name, c.Command, timeout)
		out = append(out, h)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// programInput is the JSON a hook program reads on stdin.
type programInput struct {
	Hook     string               `json:"hook"`
	Point    string               `json:"point"`
	Agent    string               `json:"agent"`
	Session  string               `json:"session"`
	Message  *programMessage      `json:"message,omitempty"`
	Outputs  []programMessage     `json:"outputs,omitempty"`
	Messages []schemas.LLMMessage `json:"messages,omitempty"`
	Response *schemas.LLMResponse `json:"response,omitempty"`
	Tool     string               `json:"tool,omitempty"`
	Args     map[string]any       `json:"args,omitempty"`
	Result   *schemas.ToolResult  `json:"result,omitempty"`
	Text     string               `json:"text,omitempty"`
	DAGID    string               `json:"dag_id,omitempty"`
	NodeID   string               `json:"node_id,omitempty"`
}

type programMessage struct {
	ID      string       `json:"id"`
	Type    schemas.Type `json:"type"`
	Source  string       `json:"source"`
	Target  string       `json:"target,omitempty"`
	Payload any          `json:"payload,omitempty"`
}

func messageOf(env *schemas.Envelope) programMessage {
	m := programMessage{ID: env.ID, Type: env.Type, Source: env.Source, Target: env.Target}
	if p, err := schemas.DecodePayload(env); err == nil {
		m.Payload = p
	}
	return m
}

// programDecision is the JSON a hook program prints: empty output continues.
type programDecision struct {
	Decision string         `json:"decision"`
	Reason   string         `json:"reason,omitempty"`
	Context  string         `json:"context,omitempty"`
	Args     map[string]any `json:"args,omitempty"`
	Answer   string         `json:"answer,omitempty"`
	Redact   []string       `json:"redact,omitempty"`
	Events   []programEvent `json:"events,omitempty"`
}

// programEvent is an event a hook program returns.
type programEvent struct {
	Type    string          `json:"type"`
	Target  string          `json:"target,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// MaxProgramEvents bounds the events of one hook program's decision.
const MaxProgramEvents = 16

// callRecords are the events that record a side effect once under its call
// id: a hook cannot return one, or it could forge a tool's or the model's
// answer that replays would then trust.
var callRecords = []schemas.Type{schemas.TypeToolCall, schemas.TypeToolResult, schemas.TypeLLMRequest, schemas.TypeLLMResponse,
	schemas.TypeLLMUsage, schemas.TypeStreamChunk, schemas.TypeSkillsSelected, schemas.TypeHookDecision}

// programEvents checks the events of a program's decision against the
// message catalogue: a known type that records no call, an agent (or
// "user", the default) as target, and a payload that satisfies the type's
// published JSON Schema and has no unknown field.
func programEvents(evs []programEvent) ([]Event, error) {
	if len(evs) > MaxProgramEvents {
		return nil, fmt.Errorf("its output has %d events, at most %d", len(evs), MaxProgramEvents)
	}
	out := make([]Event, 0, len(evs))
	for i, e := range evs {
		t := schemas.Type(e.Type)
		where := fmt.Sprintf("its events[%d] (%s)", i, e.Type)
		switch {
		case e.Type == "":
			return nil, fmt.Errorf("its events[%d] has no type ('sylk schema' lists them)", i)
		case !t.Known():
			return nil, fmt.Errorf("%s: not a message type ('sylk schema' lists them)", where)
		case slices.Contains(callRecords, t):
			return nil, fmt.Errorf("%s: records a tool or LLM call, a skill selection or a hook decision; a hook cannot return one", where)
		}
		target := e.Target
		if target == "" {
			target = "user"
		}
		if !schemas.ValidName(target) {
			return nil, fmt.Errorf("%s: target %q is not an agent name", where, e.Target)
		}
		raw := e.Payload
		if len(raw) == 0 {
			raw = json.RawMessage("{}")
		}
		p, err := schemas.DecodePayloadJSON(t, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, Event{Type: t, Target: target, Payload: p})
	}
	return out, nil
}

// programFunc runs a hook program: the data as JSON on stdin, a decision as
// JSON on stdout. A program that cannot start, exits non-zero, is killed at
// its timeout, or prints anything but a decision fails.
func programFunc(progs Programs, name string, argv []string, timeout time.Duration) Func {
	return func(ctx context.Context, d *Data) (Decision, error) {
		in := programInput{Hook: name, Point: d.Point.String(), Agent: d.Agent, Session: d.Session, Messages: d.Messages,
			Response: d.Response, Tool: d.Tool, Args: d.Args, Result: d.Result, Text: d.Text, DAGID: d.DAGID, NodeID: d.NodeID}
		if d.Message != nil {
			m := messageOf(d.Message)
			in.Message = &m
		}
		for _, o := range d.Outputs {
			in.Outputs = append(in.Outputs, messageOf(o))
		}
		stdin, err := json.Marshal(in)
		if err != nil {
			return Decision{}, fmt.Errorf("its input: %w", err)
		}
		res, err := progs.RunProgram(ctx, tools.Program{Argv: argv, Stdin: stdin, Timeout: timeout})
		switch {
		case err != nil:
			return Decision{}, err
		case res.TimedOut:
			return Decision{}, fmt.Errorf("killed at its timeout of %s", timeout)
		case !res.OK:
			return Decision{}, fmt.Errorf("%s%s", res.Error, stderrTail(res.Stderr))
		case res.RawCut:
			return Decision{}, fmt.Errorf("its output is over %d bytes", tools.DefaultProgramStdout)
		}
		return parseDecision(res.Raw)
	}
}

func stderrTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 300 {
		s = "…" + s[len(s)-300:]
	}
	return "; stderr: " + s
}

// parseDecision reads a program's decision strictly: unknown keys, trailing
// text and unknown decisions are errors, so a typo never passes as continue.
func parseDecision(out []byte) (Decision, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		return Decision{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var pd programDecision
	if err := dec.Decode(&pd); err != nil {
		return Decision{}, fmt.Errorf("its output is not a decision (%v): %s", err, quoteCut(out))
	}
	if dec.More() {
		return Decision{}, fmt.Errorf("its output has more than one JSON value: %s", quoteCut(out))
	}
	switch Action(pd.Decision) {
	case Continue, Block, Answer:
	case "":
		return Decision{}, fmt.Errorf(`its output has no "decision" (continue, block or answer): %s`, quoteCut(out))
	default:
		return Decision{}, fmt.Errorf("unknown decision %q (continue, block or answer)", pd.Decision)
	}
	evs, err := programEvents(pd.Events)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Action: Action(pd.Decision), Reason: pd.Reason, Context: pd.Context, Args: pd.Args, Answer: pd.Answer, Redact: pd.Redact, Events: evs}, nil
}

func quoteCut(b []byte) string {
	const n = 200
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
