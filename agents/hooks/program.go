package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	return Decision{Action: Action(pd.Decision), Reason: pd.Reason, Context: pd.Context, Args: pd.Args, Answer: pd.Answer, Redact: pd.Redact}, nil
}

func quoteCut(b []byte) string {
	const n = 200
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
