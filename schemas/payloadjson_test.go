package schemas

import (
	"errors"
	"strings"
	"testing"
)

// A payload written as JSON outside the code is checked against the
// published schema and decoded strictly; each error names the field.
func TestDecodePayloadJSON(t *testing.T) {
	p, err := DecodePayloadJSON(TypeHistoryEntry, []byte(`{"category": "decision", "summary": "use sqlite", "tags": ["db"]}`))
	if h, ok := p.(*HistoryEntry); err != nil || !ok || h.Summary != "use sqlite" || h.Tags[0] != "db" {
		t.Fatalf("valid payload: %#v %v", p, err)
	}
	for _, c := range []struct {
		typ       Type
		raw, want string
	}{
		{TypeHistoryEntry, `{"category": "decision"}`, `payload: missing property 'summary'`},
		{TypeHistoryEntry, `{"category": "decision", "summary": 3}`, `payload.summary: got number, want string`},
		{TypeHistoryEntry, `{"category": "decision", "summary": "s", "colour": "red"}`, `unknown field "colour"`},
		{TypeHistoryEntry, `{"category": `, `payload is not JSON`},
		{"teleport", `{}`, `unknown message type: "teleport"`},
	} {
		_, err := DecodePayloadJSON(c.typ, []byte(c.raw))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.typ, c.raw, err, c.want)
		}
	}
	if _, err := DecodePayloadJSON("teleport", nil); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
}
