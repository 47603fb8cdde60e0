// Package toolloop runs an agent's tool-calling conversation with the model
// outside a DAG node: the Architect exploring a plan in plan mode, an agent
// answering a consultation. Each model answer and each tool result is
// recorded under a key derived from the delivery, so a redelivered message
// replays the conversation from the stream without calling the model or
// running a tool again, and continues where a crash cut it.
package toolloop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Defaults of Loop.
const (
	DefaultSteps      = 20
	DefaultToolOutput = 16 << 10
)

// LLM is what a loop needs of the LLM tier: *llm.Client.
type LLM interface {
	Complete(ctx context.Context, d *agents.Delivery, req llm.Request) (schemas.LLMResponse, bool, error)
	// Memory keeps a conversation within the agent's context policy.
	Memory(d *agents.Delivery, key, dag, node string) *llm.Memory
}

// ConsultPrefix is the prefix of the consult tools' names (consult_<agent>).
const ConsultPrefix = "consult_"

// Consulter gives an agent its consult_<agent> tools (agents/consult).
type Consulter interface {
	// Specs are the consult tools agent may call.
	Specs(agent string) []tools.ToolSpec
	// Runner runs the consult tool named tool for the delivery d (one that
	// names an unknown agent too, to refuse it); nil for other tools.
	Runner(d *agents.Delivery, tool string) agents.ToolRunner
	// Arrived returns the answers to d's non-blocking consultations to put
	// into its conversation before the model call key (step step), and
	// records where they were put; done holds the ones given already.
	Arrived(ctx context.Context, d *agents.Delivery, key string, step int, done map[string]bool) ([]schemas.LLMMessage, error)
}

// Loop is one conversation's settings.
type Loop struct {
	LLM     LLM
	Records agents.ToolRecords
	// Runner runs the built-in tools (a plan-mode guarded executor);
	// Consult, when set, the consult_<agent> tools.
	Runner  agents.ToolRunner
	Consult Consulter
	Specs   []tools.ToolSpec
	// Key prefixes the keys of the model calls and tool calls ("explore/1").
	Key string
	// Steps bounds the model calls (default DefaultSteps); ToolOutput the
	// bytes of a tool result given back to the model (default
	// DefaultToolOutput).
	Steps      int
	ToolOutput int
	JSON       bool
}

// Check looks at an answer without a tool call: "" accepts it; otherwise the
// text is sent back to the model as the user's reply and the loop goes on.
type Check func(content string) (retry string)

// ErrSteps is returned when the model used up its steps without an accepted
// answer.
var ErrSteps = fmt.Errorf("toolloop: step limit reached")

// Run continues msgs until the model answers without a tool call and check
// accepts it, and returns that answer and the whole conversation.
func (l *Loop) Run(ctx context.Context, d *agents.Delivery, msgs []schemas.LLMMessage, check Check) (string, []schemas.LLMMessage, error) {
	steps := l.Steps
	if steps <= 0 {
		steps = DefaultSteps
	}
	seen := 0
	mem := l.LLM.Memory(d, l.Key, "", "")
	for step := 0; step < steps; step++ {
		key := fmt.Sprintf("%s/step/%d", l.Key, step)
		fitted, changed, err := mem.Keep(ctx, key, msgs, l.Specs)
		if err != nil {
			return "", msgs, err
		}
		if changed {
			msgs, seen = fitted, 0
		}
		resp, _, err := l.LLM.Complete(ctx, d, llm.Request{Key: key, Messages: msgs, Seen: seen, Tools: l.Specs, JSON: l.JSON && len(l.Specs) == 0})
		if err != nil {
			return "", msgs, err
		}
		seen = len(msgs)
		calls := resp.ToolCalls
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = fmt.Sprintf("call_%d_%d", step, i)
			}
		}
		msgs = append(msgs, schemas.LLMMessage{Role: "assistant", Content: resp.Content, ToolCalls: calls})
		if len(calls) == 0 {
			retry := check(resp.Content)
			if retry == "" {
				return resp.Content, msgs, nil
			}
			msgs = append(msgs, schemas.LLMMessage{Role: "user", Content: retry})
			continue
		}
		for i, tc := range calls {
			res, err := l.tool(ctx, d, step, i, tc)
			if err != nil {
				return "", msgs, err
			}
			msgs = append(msgs, schemas.LLMMessage{Role: "tool", ToolCallID: tc.ID, Content: Cut(ToolText(res), l.toolOutput())})
		}
	}
	return "", msgs, fmt.Errorf("%w: %d model calls without an answer", ErrSteps, steps)
}

func (l *Loop) toolOutput() int {
	if l.ToolOutput > 0 {
		return l.ToolOutput
	}
	return DefaultToolOutput
}

// tool runs one tool call of the model, recorded; arguments that are not a
// JSON object fail without running anything.
func (l *Loop) tool(ctx context.Context, d *agents.Delivery, step, i int, tc schemas.LLMToolCall) (schemas.ToolResult, error) {
	args := strings.TrimSpace(tc.Arguments)
	if args == "" {
		args = "{}"
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return schemas.ToolResult{Tool: tc.Name, ExitCode: -1, Error: fmt.Sprintf("the arguments of %s are not a JSON object: %s", tc.Name, Cut(tc.Arguments, 200))}, nil
	}
	runner := l.Runner
	if l.Consult != nil {
		if x := l.Consult.Runner(d, tc.Name); x != nil {
			runner = x
		}
	}
	call := tools.Call{ID: tools.CallID(d.Env.ID, d.Agent, l.Key, fmt.Sprint(step), fmt.Sprint(i)), Tool: tc.Name, Args: json.RawMessage(args)}
	res, _, err := d.RunTool(ctx, runner, l.Records, call, agents.ToolWhere{})
	return res, err
}

// ToolText is a tool result as the model reads it.
func ToolText(r schemas.ToolResult) string {
	var b strings.Builder
	if r.Summary != "" {
		b.WriteString(r.Summary + "\n")
	}
	if r.Error != "" && !r.OK {
		b.WriteString("error: " + r.Error + "\n")
	}
	for _, s := range []struct{ name, text string }{{"", r.Output}, {"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		if s.text == "" {
			continue
		}
		if s.name != "" {
			b.WriteString("--- " + s.name + " ---\n")
		}
		b.WriteString(s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("%s: ok=%v exit=%d", r.Tool, r.OK, r.ExitCode)
	}
	return b.String()
}

// Cut keeps the head and the tail of s within n bytes.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	half := n / 2
	return strings.ToValidUTF8(s[:half]+fmt.Sprintf("\n[... %d bytes cut ...]\n", len(s)-2*half)+s[len(s)-half:], "")
}
