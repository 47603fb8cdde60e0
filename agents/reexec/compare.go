package reexec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Event is an event as re-execution compares it: what it is and says, not
// when or under which id.
type Event struct {
	Seq     uint64         `json:"seq,omitempty"`
	ID      string         `json:"id"`
	Session string         `json:"session"`
	Type    schemas.Type   `json:"type"`
	Source  string         `json:"source"`
	Target  string         `json:"target,omitempty"`
	Payload map[string]any `json:"payload,omitempty"`
}

// Field is one difference between a recorded event and a new one; a side
// that lacks the field is nil.
type Field struct {
	Path     string `json:"path"`
	Recorded any    `json:"recorded"`
	New      any    `json:"new"`
}

// ignored reports whether a payload field is one re-execution does not
// compare: times and durations, which differ from run to run by nature.
func ignored(name string) bool {
	return strings.HasSuffix(name, "_at") || strings.HasSuffix(name, "_ms") || strings.HasPrefix(name, "duration") ||
		name == "not_before" || name == "timestamp" || name == "seconds"
}

// same reports whether a and b are equal in everything re-execution
// compares, the payload byte for byte: they need no normalising to tell.
func same(a, b *schemas.Envelope) bool {
	return a.Type == b.Type && a.Source == b.Source && a.Target == b.Target && a.SessionID == b.SessionID && bytes.Equal(a.Payload, b.Payload)
}

// Normalize is env as re-execution compares it: type, source, target,
// session and the payload as JSON, without times and durations.
func Normalize(seq uint64, env *schemas.Envelope) *Event {
	e := &Event{Seq: seq, ID: env.ID, Session: env.SessionID, Type: env.Type, Source: env.Source, Target: env.Target}
	p, err := schemas.DecodePayload(env)
	if err != nil {
		e.Payload = map[string]any{"(undecodable)": err.Error()}
		return e
	}
	b, err := json.Marshal(p)
	if err == nil {
		err = json.Unmarshal(b, &e.Payload)
	}
	if err != nil {
		e.Payload = map[string]any{"(undecodable)": err.Error()}
		return e
	}
	strip(e.Payload)
	return e
}

func strip(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if ignored(k) {
				delete(x, k)
				continue
			}
			strip(c)
		}
	case []any:
		for _, c := range x {
			strip(c)
		}
	}
}

// maxFields bounds a diff's list.
const maxFields = 20

// Diff lists how b differs from a (a: recorded, b: new), at most maxFields.
func Diff(a, b *Event) []Field {
	var out []Field
	add := func(path string, x, y any) {
		if len(out) < maxFields {
			out = append(out, Field{Path: path, Recorded: x, New: y})
		}
	}
	for _, f := range []struct {
		name string
		x, y string
	}{{"type", string(a.Type), string(b.Type)}, {"source", a.Source, b.Source}, {"target", a.Target, b.Target}, {"session", a.Session, b.Session}} {
		if f.x != f.y {
			add(f.name, f.x, f.y)
		}
	}
	diffValue("payload", a.Payload, b.Payload, add)
	return out
}

func diffValue(path string, x, y any, add func(string, any, any)) {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(xv)+len(yv))
		for k := range xv {
			keys = append(keys, k)
		}
		for k := range yv {
			if _, dup := xv[k]; !dup {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			diffValue(path+"."+k, xv[k], yv[k], add)
		}
		return
	case []any:
		yv, ok := y.([]any)
		if !ok {
			break
		}
		for i := range max(len(xv), len(yv)) {
			var a, b any
			if i < len(xv) {
				a = xv[i]
			}
			if i < len(yv) {
				b = yv[i]
			}
			diffValue(path+"["+strconv.Itoa(i)+"]", a, b, add)
		}
		return
	}
	if !reflect.DeepEqual(x, y) {
		add(path, x, y)
	}
}

// RequestChange is what changed in an LLM call's request.
type RequestChange struct {
	CallID string `json:"call_id"`
	Agent  string `json:"agent"`
	// Model and Tools are set when they changed: [recorded, new].
	Model *[2]string   `json:"model,omitempty"`
	Tools *[2][]string `json:"tools,omitempty"`
	// Message is the first message that differs, by index among the ones the
	// recording holds for this call (a conversation's later calls record only
	// the messages after the earlier calls').
	Message *MessageChange `json:"message,omitempty"`
}

// MessageChange is one message that differs.
type MessageChange struct {
	Index    int    `json:"index"`
	Role     string `json:"role"`
	Recorded string `json:"recorded"`
	New      string `json:"new"`
}

// requestChange compares a new request with the recorded one; nil if they
// are the same.
func requestChange(rec, req *schemas.LLMRequest) *RequestChange {
	if rec.MessagesDigest == req.MessagesDigest && rec.Model == req.Model && slices.Equal(rec.Tools, req.Tools) {
		return nil
	}
	c := &RequestChange{CallID: req.CallID, Agent: req.Agent}
	if rec.Model != req.Model {
		c.Model = &[2]string{rec.Model, req.Model}
	}
	if !slices.Equal(rec.Tools, req.Tools) {
		c.Tools = &[2][]string{rec.Tools, req.Tools}
	}
	// The recording holds the last len(rec.Messages) messages of the call.
	newMsgs := req.Messages
	if off := len(newMsgs) - len(rec.Messages); off > 0 {
		newMsgs = newMsgs[off:]
	}
	for i := range max(len(rec.Messages), len(newMsgs)) {
		var a, b schemas.LLMMessage
		if i < len(rec.Messages) {
			a = rec.Messages[i]
		}
		if i < len(newMsgs) {
			b = newMsgs[i]
		}
		if !reflect.DeepEqual(a, b) {
			role := a.Role
			if role == "" {
				role = b.Role
			}
			c.Message = &MessageChange{Index: i, Role: role, Recorded: a.Content, New: b.Content}
			break
		}
	}
	return c
}

// String says what changed in one line per part.
func (c *RequestChange) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "LLM call %s of %s: the request changed", c.CallID, c.Agent)
	if c.Model != nil {
		fmt.Fprintf(&b, "\n  model: %s -> %s", c.Model[0], c.Model[1])
	}
	if c.Tools != nil {
		fmt.Fprintf(&b, "\n  tools: %v -> %v", c.Tools[0], c.Tools[1])
	}
	if m := c.Message; m != nil {
		fmt.Fprintf(&b, "\n  message %d (%s):\n    recorded: %s\n    new:      %s", m.Index, m.Role, clipText(m.Recorded), clipText(m.New))
	}
	if c.Model == nil && c.Tools == nil && c.Message == nil {
		b.WriteString("\n  messages: an earlier message of the conversation differs (the digests differ)")
	}
	return b.String()
}

func clipText(s string) string {
	const n = 200
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
