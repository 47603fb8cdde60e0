package projections

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendNodeJSON appends n as JSON, as encoding/json would write it (same
// field names, same omitempty rules). Nodes are the values a rebuild writes
// most often, and reflection made their encoding a tenth of its cost.
// TestNodeJSONMatchesEncodingJSON keeps the two in step.
func appendNodeJSON(b []byte, n *Node) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, n.ID)
	b = appendStringField(b, "agent", n.Agent)
	b = appendStringField(b, "tool", n.Tool)
	b = appendStringField(b, "prompt", n.Prompt)
	if len(n.DependsOn) > 0 {
		b = append(b, `,"depends_on":[`...)
		for i, d := range n.DependsOn {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, d)
		}
		b = append(b, ']')
	}
	b = append(b, `,"layer":`...)
	b = strconv.AppendInt(b, int64(n.Layer), 10)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(n.State))
	if n.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(n.Attempt), 10)
	}
	if r := n.Result; r != nil {
		b = append(b, `,"result":{`...)
		first := true
		for _, f := range [...]struct{ k, v string }{{"summary", r.Summary}, {"evidence", r.Evidence}, {"call_id", r.CallID}} {
			if f.v != "" {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = appendJSONString(b, f.k)
				b = append(b, ':')
				b = appendJSONString(b, f.v)
			}
		}
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"seq":`...)
		b = strconv.AppendUint(b, r.Seq, 10)
		b = append(b, '}')
	}
	b = appendStringField(b, "last_error", n.LastError)
	if n.Retryable {
		b = append(b, `,"retryable":true`...)
	}
	b = appendStringField(b, "help", n.Help)
	b = appendStringField(b, "skip_reason", n.SkipReason)
	if len(n.Calls) > 0 {
		b = append(b, `,"calls":[`...)
		for i, c := range n.Calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, c.ID)
			b = appendStringField(b, "tool", c.Tool)
			if c.Attempt != 0 {
				b = append(b, `,"attempt":`...)
				b = strconv.AppendInt(b, int64(c.Attempt), 10)
			}
			if c.Seq != 0 {
				b = append(b, `,"seq":`...)
				b = strconv.AppendUint(b, c.Seq, 10)
			}
			if c.ResultSeq != 0 {
				b = append(b, `,"result_seq":`...)
				b = strconv.AppendUint(b, c.ResultSeq, 10)
			}
			if c.OK {
				b = append(b, `,"ok":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendTimeField(b, "dispatched_at", n.DispatchedAt)
	b = appendTimeField(b, "started_at", n.StartedAt)
	b = appendTimeField(b, "finished_at", n.FinishedAt)
	return append(b, '}')
}

func appendStringField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

func appendTimeField(b []byte, k string, t *time.Time) []byte {
	if t == nil {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':', '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping as encoding/json does
// (HTML-sensitive characters too; invalid UTF-8 becomes U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
