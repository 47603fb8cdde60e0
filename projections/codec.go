package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sylk/sylk/schemas"
)

// appendNodeJSON appends n as JSON, as encoding/json would write it (same
// field names, same omitempty rules). Nodes are the values a rebuild writes
// most often, and reflection made their encoding a tenth of its cost.
// TestNodeJSONMatchesEncodingJSON keeps the two in step.
func appendNodeJSON(b []byte, n *Node) []byte {
	b = append(b, `{"id":`...)
	b = schemas.AppendJSONString(b, n.ID)
	b = appendStringField(b, "agent", n.Agent)
	b = appendStringField(b, "tool", n.Tool)
	b = appendStringField(b, "prompt", n.Prompt)
	b = appendArrayField(b, "depends_on", n.DependsOn, appendJSONStringAt)
	b = append(b, `,"layer":`...)
	b = strconv.AppendInt(b, int64(n.Layer), 10)
	b = append(b, `,"state":`...)
	b = schemas.AppendJSONString(b, string(n.State))
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
				b = schemas.AppendJSONString(b, f.k)
				b = append(b, ':')
				b = schemas.AppendJSONString(b, f.v)
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
			b = schemas.AppendJSONString(b, c.ID)
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

// appendArrayField appends the field k, an array of items each appended by
// elem, unless there are none (omitempty).
func appendArrayField[T any](b []byte, k string, items []T, elem func([]byte, *T) []byte) []byte {
	if len(items) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':', '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, &items[i])
	}
	return append(b, ']')
}

func appendJSONStringAt(b []byte, s *string) []byte { return schemas.AppendJSONString(b, *s) }

func appendStringField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':')
	return schemas.AppendJSONString(b, v)
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

// decodeNodeJSON decodes what appendNodeJSON writes into n, as encoding/json
// would, and reports whether it could: anything else (whitespace, an escaped
// string, an unknown key) returns false, and the caller decodes with
// encoding/json instead. Reading a DAG decodes every node, and the
// Orchestrator reads its DAG at every step: with encoding/json that was most of
// a long DAG's overhead per node. TestDecodeNodeJSON keeps the two in step.
func decodeNodeJSON(b []byte, n *Node) bool {
	r := &jsonReader{b: b, ok: true}
	r.object(func(key string) {
		switch key {
		case "id":
			n.ID = r.str()
		case "agent":
			n.Agent = r.str()
		case "tool":
			n.Tool = r.str()
		case "prompt":
			n.Prompt = r.str()
		case "depends_on":
			n.DependsOn = []string{}
			r.array(func() { n.DependsOn = append(n.DependsOn, r.str()) })
		case "layer":
			n.Layer = int(r.int())
		case "state":
			n.State = NodeState(r.str())
		case "attempt":
			n.Attempt = int(r.int())
		case "result":
			res := &NodeResult{}
			r.object(func(key string) {
				switch key {
				case "summary":
					res.Summary = r.str()
				case "evidence":
					res.Evidence = r.str()
				case "call_id":
					res.CallID = r.str()
				case "seq":
					res.Seq = r.uint()
				default:
					r.ok = false
				}
			})
			n.Result = res
		case "last_error":
			n.LastError = r.str()
		case "retryable":
			n.Retryable = r.boolean()
		case "help":
			n.Help = r.str()
		case "skip_reason":
			n.SkipReason = r.str()
		case "calls":
			n.Calls = []Call{}
			r.array(func() {
				var c Call
				r.object(func(key string) {
					switch key {
					case "id":
						c.ID = r.str()
					case "tool":
						c.Tool = r.str()
					case "attempt":
						c.Attempt = int(r.int())
					case "seq":
						c.Seq = r.uint()
					case "result_seq":
						c.ResultSeq = r.uint()
					case "ok":
						c.OK = r.boolean()
					default:
						r.ok = false
					}
				})
				n.Calls = append(n.Calls, c)
			})
		case "dispatched_at":
			n.DispatchedAt = r.time()
		case "started_at":
			n.StartedAt = r.time()
		case "finished_at":
			n.FinishedAt = r.time()
		default:
			r.ok = false
		}
	})
	return r.ok && r.i == len(b)
}

// jsonReader reads the compact JSON that appendNodeJSON writes. Its first
// failure clears ok and every later read is a no-op.
type jsonReader struct {
	b  []byte
	i  int
	ok bool
}

func (r *jsonReader) next(c byte) bool {
	if r.ok && r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *jsonReader) expect(c byte) {
	if !r.next(c) {
		r.ok = false
	}
}

// object reads {"key":value,...}, calling value for each key to read its
// value. A key given twice is refused: encoding/json merges such values.
func (r *jsonReader) object(value func(key string)) {
	r.expect('{')
	if r.next('}') {
		return
	}
	var seen [20]string
	for n := 0; r.ok; n++ {
		key := r.str()
		if n == len(seen) || slices.Contains(seen[:n], key) {
			r.ok = false
			return
		}
		seen[n] = key
		r.expect(':')
		value(key)
		if !r.next(',') {
			break
		}
	}
	r.expect('}')
}

// array reads [value,...], calling value to read each.
func (r *jsonReader) array(value func()) {
	r.expect('[')
	if r.next(']') {
		return
	}
	for r.ok {
		value()
		if !r.next(',') {
			break
		}
	}
	r.expect(']')
}

// str reads a string without escapes.
func (r *jsonReader) str() string {
	r.expect('"')
	start := r.i
	for r.ok && r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			r.i++
			return string(r.b[start : r.i-1])
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			r.ok = false // escapes and non-ASCII: encoding/json decides
		default:
			r.i++
		}
	}
	r.ok = false
	return ""
}

func (r *jsonReader) int() int64 {
	if r.next('-') {
		v := r.uint()
		if v > 1<<63 {
			r.ok = false
		}
		return -int64(v)
	}
	v := r.uint()
	if v >= 1<<63 {
		r.ok = false
	}
	return int64(v)
}

func (r *jsonReader) uint() uint64 {
	var v uint64
	start := r.i
	for r.ok && r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		d := uint64(r.b[r.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			r.ok = false // overflows: encoding/json says so
		}
		v = v*10 + d
		r.i++
	}
	if n := r.i - start; n == 0 || n > 1 && r.b[start] == '0' {
		r.ok = false
	}
	return v
}

func (r *jsonReader) boolean() bool {
	switch {
	case r.ok && bytes.HasPrefix(r.b[r.i:], []byte("true")):
		r.i += 4
		return true
	case r.ok && bytes.HasPrefix(r.b[r.i:], []byte("false")):
		r.i += 5
	default:
		r.ok = false
	}
	return false
}

// time reads a time as encoding/json does (time.Time.UnmarshalJSON).
func (r *jsonReader) time() *time.Time {
	start := r.i
	r.str()
	if !r.ok {
		return nil
	}
	t := &time.Time{}
	if err := t.UnmarshalJSON(r.b[start:r.i]); err != nil {
		r.ok = false
		return nil
	}
	return t
}

// recordReader reads the varints and byte strings of a stored binary record
// (an audit chunk or entry, a code file's record) until its first error:
// every read after it returns zero and leaves b where the error was.
type recordReader struct {
	b   []byte
	err error
}

// errTruncated: a record ends in the middle of a value.
var errTruncated = errors.New("truncated")

func (d *recordReader) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// take returns the next n bytes, not copied (nil past the end).
func (d *recordReader) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *recordReader) byte() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *recordReader) uvarint() uint64 { return readVarint(d, binary.Uvarint) }

func (d *recordReader) varint() int64 { return readVarint(d, binary.Varint) }

// readVarint reads one varint with read (binary.Uvarint or binary.Varint).
func readVarint[T uint64 | int64](d *recordReader, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	x, n := read(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes reads a length and that many bytes, not copied.
func (d *recordReader) bytes() []byte { return d.take(d.uvarint()) }
