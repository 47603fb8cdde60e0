package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// go-openai encodes a request's messages and tools through their own
// MarshalJSON methods, each a json.Marshal inside the request's json.Marshal
// whose output encoding/json scans again to compact it: a tool's schema is
// scanned three times, a message's content encoded twice and scanned once.
// For a system prompt and a dozen tool schemas that was about 120 µs per
// call, on every call's critical path, and go-openai takes no other encoder.
// So the provider encodes the messages and tools once itself, into the same
// bytes, hands go-openai the request without them, and the HTTP doer splices
// them into the body go-openai built (which carries everything else,
// "stream" included).

// wireMessage is a chat message as go-openai's ChatCompletionMessage
// encodes one that has no parts, refusal, reasoning or function call (the
// provider sets none): the same fields in the same order.
type wireMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content,omitempty"`
	Name       string            `json:"name,omitempty"`
	ToolCalls  []openai.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// wireTool is a function tool as go-openai's Tool encodes one (a map, so
// its keys in order).
type wireTool struct {
	Function *openai.FunctionDefinition `json:"function"`
	Type     openai.ToolType            `json:"type"`
}

// errNoMessagesKey: go-openai's body did not hold its encoding of a request
// without messages.
var errNoMessagesKey = errors.New("llm: the request body has no empty messages key to fill")

// toolJSON keeps the encoding of each tool: the same few schemas go out
// call after call, and encoding one scans its schema to compact it.
type toolJSON struct {
	mu sync.Mutex
	m  map[string][]byte
}

// maxToolJSON bounds the kept encodings; past it they are dropped and
// encoded again (a process has a few dozen tools).
const maxToolJSON = 512

// encode returns t as go-openai encodes it; kb is scratch space for the
// key of its kept encoding (returned for reuse).
func (c *toolJSON) encode(t openai.Tool, kb []byte) ([]byte, []byte, error) {
	fd := t.Function
	params, ok := fd.Parameters.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(wireTool{Function: fd, Type: t.Type})
		return b, kb, err
	}
	kb = append(append(append(kb[:0], t.Type...), 0), fd.Name...)
	kb = append(append(append(kb, 0), fd.Description...), 0)
	kb = append(append(strconv.AppendBool(kb, fd.Strict), 0), params...)
	c.mu.Lock()
	b, ok := c.m[string(kb)]
	c.mu.Unlock()
	if ok {
		return b, kb, nil
	}
	b, err := json.Marshal(wireTool{Function: fd, Type: t.Type})
	if err != nil {
		return nil, kb, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxToolJSON {
		c.m = map[string][]byte{}
	}
	c.m[string(kb)] = b
	c.mu.Unlock()
	return b, kb, nil
}

// split returns req without its messages and tools, for go-openai to
// encode, and the JSON object members ("messages":[...] and "tools":[...])
// that splice puts back. ok is false for a request it cannot encode as
// go-openai would (a message or tool of a kind the provider never builds,
// a tool schema that is not JSON): go-openai then encodes the whole
// request, and refuses it as it always did.
func (c *toolJSON) split(req openai.ChatCompletionRequest) (stub openai.ChatCompletionRequest, members []byte, ok bool) {
	msgs := make([]wireMessage, len(req.Messages))
	for i, m := range req.Messages {
		if len(m.MultiContent) > 0 || m.Refusal != "" || m.ReasoningContent != "" || m.FunctionCall != nil {
			return req, nil, false
		}
		msgs[i] = wireMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	}
	tools := make([][]byte, len(req.Tools))
	n := 0
	var kb []byte
	for i, t := range req.Tools {
		if t.Function == nil || len(t.Parameters) > 0 {
			return req, nil, false
		}
		b, k, err := c.encode(t, kb)
		if kb = k; err != nil {
			return req, nil, false
		}
		tools[i], n = b, n+len(b)+1
	}
	mb, err := json.Marshal(msgs)
	if err != nil {
		return req, nil, false
	}
	out := make([]byte, 0, len(`"messages":,"tools":[]`)+len(mb)+n)
	out = append(append(out, `"messages":`...), mb...)
	if len(tools) > 0 {
		out = append(out, `,"tools":[`...)
		for i, b := range tools {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, b...)
		}
		out = append(out, ']')
	}
	req.Messages, req.Tools = nil, nil
	return req, out, true
}

// splice returns the body with members (from toolJSON.split) in place of
// the "messages":null that go-openai's body of the stripped request holds
// right after its model (no string can hold that sequence unescaped, so
// the first one is the key), as the parts to send one after another.
func splice(body, members []byte) ([][]byte, error) {
	const empty = `"messages":null`
	i := bytes.Index(body, []byte(empty))
	if i < 0 {
		return nil, errNoMessagesKey
	}
	return [][]byte{body[:i], members, body[i+len(empty):]}, nil
}

// fill replaces req's body with the body spliced with members.
func fill(req *http.Request, members []byte) error {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	if err := req.Body.Close(); err != nil {
		return err
	}
	parts, err := splice(body, members)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	req.GetBody = func() (io.ReadCloser, error) {
		rs := make([]io.Reader, len(parts))
		for i, p := range parts {
			rs[i] = bytes.NewReader(p)
		}
		return io.NopCloser(io.MultiReader(rs...)), nil
	}
	req.Body, _ = req.GetBody()
	req.ContentLength = int64(n)
	return nil
}
