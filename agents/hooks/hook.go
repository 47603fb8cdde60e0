package hooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sylk/sylk/schemas"
)

// Point is where in an agent's work a hook runs.
type Point uint8

// The points, in the order an agent meets them.
const (
	PreMessage Point = iota
	PostMessage
	PrePrompt
	PostPrompt
	PreTool
	PostTool
	numPoints
)

var pointNames = [numPoints]string{"pre_message", "post_message", "pre_prompt", "post_prompt", "pre_tool", "post_tool"}

// Points lists every point in order.
func Points() []Point {
	return []Point{PreMessage, PostMessage, PrePrompt, PostPrompt, PreTool, PostTool}
}

func (p Point) String() string {
	if p < numPoints {
		return pointNames[p]
	}
	return "point(" + strconv.Itoa(int(p)) + ")"
}

// ParsePoint parses a point's name (pre_tool).
func ParsePoint(s string) (Point, error) {
	if i := slices.Index(pointNames[:], s); i >= 0 {
		return Point(i), nil
	}
	return 0, fmt.Errorf("unknown point %q (one of %s)", s, strings.Join(pointNames[:], ", "))
}

func (p Point) tool() bool { return p == PreTool || p == PostTool }
func (p Point) pre() bool  { return p == PreMessage || p == PrePrompt || p == PreTool }

// Priority orders the hooks of a point: lower runs first, ties in the order
// the hooks were registered.
type Priority int

// The seed's priorities (seed L20904-20919).
const (
	First  Priority = 0
	Early  Priority = 25
	Normal Priority = 50
	Late   Priority = 75
	Last   Priority = 100
)

var priorityNames = map[string]Priority{"first": First, "early": Early, "normal": Normal, "late": Late, "last": Last}

// ParsePriority parses first, early, normal, late, last or a number from 0
// to 100.
func ParsePriority(s string) (Priority, error) {
	if p, ok := priorityNames[strings.ToLower(strings.TrimSpace(s))]; ok {
		return p, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < int(First) || n > int(Last) {
		return 0, fmt.Errorf("unknown priority %q (first, early, normal, late, last, or a number from 0 to 100)", s)
	}
	return Priority(n), nil
}

func (p Priority) String() string {
	for name, v := range priorityNames {
		if v == p {
			return name
		}
	}
	return strconv.Itoa(int(p))
}

// Action is what a hook decides about the call it runs before or after.
type Action string

// Actions.
const (
	// Continue lets the call go on (with the context, arguments and
	// redactions the decision carries).
	Continue Action = "continue"
	// Block stops it: the model sees Reason instead of a tool result; a
	// blocked LLM call ends the task with Reason; a blocked message is not
	// handled (its events, a reroute_request, are appended instead).
	Block Action = "block"
	// Answer replaces the call with Decision.Answer: a tool result's text or
	// the model's answer, from a cache.
	Answer Action = "answer"
)

// Decision is a hook's answer. The zero value continues unchanged.
type Decision struct {
	Action Action
	// Reason says why a hook blocked, for the model or the user.
	Reason string
	// Context is text to add: to the system prompt (pre_prompt), to the
	// text of a tool result (pre_tool, post_tool) or of the model's answer
	// (post_prompt).
	Context string
	// Args replace the tool call's arguments (pre_tool).
	Args map[string]any
	// Answer is the text that replaces the call (pre_tool, pre_prompt).
	Answer string
	// Redact lists literal strings to remove from the text the model sees
	// (post_tool, post_prompt); RedactFunc, for in-process hooks, rewrites
	// it (the secret redactor).
	Redact     []string
	RedactFunc func(string) string
	// Events are appended with the agent's outputs before the ack: the
	// only side effect a hook may have.
	Events []Event
}

// Event is an event a hook returns, addressed to Target (an agent, or
// "user").
type Event struct {
	Type    schemas.Type
	Target  string
	Payload any
}

// changes reports whether the decision changes anything: such decisions are
// recorded.
func (d *Decision) changes() bool {
	return (d.Action != "" && d.Action != Continue) || d.Context != "" || d.Args != nil || len(d.Redact) > 0 ||
		d.RedactFunc != nil || len(d.Events) > 0
}

// check refuses what a decision may not do at point p.
func (d *Decision) check(p Point) error {
	switch d.Action {
	case "", Continue:
	case Block:
		if p == PostMessage {
			return errors.New("block is not possible after a message was handled")
		}
		if strings.TrimSpace(d.Reason) == "" {
			return errors.New("block without a reason: the model is shown the reason")
		}
	case Answer:
		if p != PreTool && p != PrePrompt {
			return fmt.Errorf("answer is possible only at pre_tool and pre_prompt, not %s", p)
		}
	default:
		return fmt.Errorf("unknown decision %q (continue, block or answer)", d.Action)
	}
	switch {
	case d.Args != nil && p != PreTool:
		return fmt.Errorf("args can be changed only at pre_tool, not %s", p)
	case d.Context != "" && (p == PreMessage || p == PostMessage):
		return fmt.Errorf("context can be added only around an LLM or tool call, not at %s", p)
	case (len(d.Redact) > 0 || d.RedactFunc != nil) && p != PostTool && p != PostPrompt:
		return fmt.Errorf("redact applies to post_tool and post_prompt, not %s", p)
	}
	return nil
}

// Data is what the hooks of one point see. Hooks read it; they change
// things only through their Decision (later hooks see the arguments and text
// earlier ones changed).
type Data struct {
	Point   Point
	Agent   string
	Session string
	// Message is the message the agent is handling (every point).
	Message *schemas.Envelope
	// Outputs are the handler's events (post_message).
	Outputs []*schemas.Envelope
	// Messages is the conversation about to be sent (pre_prompt).
	Messages []schemas.LLMMessage
	// Response is the model's answer (post_prompt).
	Response *schemas.LLMResponse
	// Tool and Args are the tool call (tool points).
	Tool string
	Args map[string]any
	// Result is the tool's result (post_tool).
	Result *schemas.ToolResult
	// Text is what the model will see (post_tool: the result's text,
	// post_prompt: the answer's content).
	Text string
	// DAGID and NodeID name the task, if any.
	DAGID, NodeID string
}

// Func is an in-process hook. It must not act on the world: whatever it
// wants done it returns as events.
type Func func(ctx context.Context, d *Data) (Decision, error)

// Hook is one registered hook.
type Hook struct {
	// Name is unique per point.
	Name     string
	Point    Point
	Priority Priority
	// Trigger limits a tool point's hook to these tools; empty: every tool.
	Trigger []string
	// Agents limits the hook to these agents; empty: every agent.
	Agents []string
	// Source is "builtin" or "config" (a user hook).
	Source string
	// FailClosed: a failure of the hook blocks the call (except after a
	// message, which cannot be blocked); otherwise the call goes on. Either
	// way the failure is recorded.
	FailClosed bool
	// Command and Timeout are a user hook's program and its timeout (for
	// listings).
	Command []string
	Timeout time.Duration
	// Run decides. program says it runs a program, an outside call that is
	// recorded whatever it decides.
	Run     Func
	program bool
}

func (h *Hook) applies(agent, tool string) bool {
	if len(h.Agents) > 0 && !slices.Contains(h.Agents, agent) {
		return false
	}
	return len(h.Trigger) == 0 || slices.Contains(h.Trigger, tool)
}

// call runs the hook, turning a panic into an error.
func (h *Hook) call(ctx context.Context, d *Data) (dec Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return h.Run(ctx, d)
}
