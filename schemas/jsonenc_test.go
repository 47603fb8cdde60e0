package schemas

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// encodingJSON is the envelope's JSON as encoding/json writes it: the
// reference AppendJSON must match byte for byte.
func encodingJSON(e *Envelope, p any) ([]byte, error) {
	if p == nil {
		p = e.anyPayload()
	}
	type plain Envelope
	return json.Marshal(struct {
		*plain
		Payload any `json:"payload"`
	}{(*plain)(e), p})
}

// briefJSON is the envelope's brief JSON as encoding/json writes it: the
// reference AppendBriefJSON must match byte for byte.
func briefJSON(e *Envelope, p any) ([]byte, error) {
	if p == nil {
		p = e.anyPayload()
	}
	return json.Marshal(struct {
		SessionID string    `json:"session_id"`
		Source    string    `json:"source"`
		Target    string    `json:"target,omitempty"`
		Type      Type      `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Payload   any       `json:"payload"`
	}{e.SessionID, e.Source, e.Target, e.Type, e.Timestamp, p})
}

// oddStrings are strings encoding/json escapes: quotes, backslashes,
// control characters, the HTML characters, U+2028 and U+2029, invalid
// UTF-8, and plain unicode it leaves alone.
var oddStrings = []string{
	"",
	"plain",
	`<b>"quoted" & \ back</b>`,
	"tab\tnl\ncr\rbs\bff\f nul\x00 esc\x1b del\x7f",
	"é ünïcödé 日本語 🚀",
	"line\u2028para\u2029end",
	"bad \xff\xfe utf8 \xc3",
	"half \xe2\x80",
}

// oddValues are what an `any` field holds after a msgpack round trip, and
// then some.
var oddValues = []any{
	nil, true, int8(-3), int64(1 << 60), uint64(math.MaxUint64), float32(0.1), 1e-7, 1e21, -0.0, 3.0,
	"x<y", []any{"a", 1.5, nil}, map[string]any{"z": 1, "a": []any{map[string]any{"<": ">"}}},
	[]byte("bytes"), time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", -(5*3600+30*60))),
}

var oddTimes = []time.Time{
	time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.UTC),
	time.Date(1999, 12, 31, 23, 59, 59, 0, time.FixedZone("y", 9*3600)),
	time.Date(2026, 6, 1, 0, 0, 0, 100, time.FixedZone("z", -23*3600-59*60)),
	{},
}

var oddFloats = []float64{0, 0.1, -2.5, 1e-7, 9.9e-7, 5e20, 1e21, 123456789.125, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Copysign(0, -1)}

// fillOdd sets every field v holds, recursively, to one of the odd values
// chosen by n: a different mix for each n, with empty, nil and zero values
// among them for omitempty.
func fillOdd(v reflect.Value, n int, depth int) {
	if depth > 6 {
		return
	}
	pick := func(k int) int { return (n*7 + k*3 + depth) }
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(oddTimes[pick(1)%len(oddTimes)]))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(oddStrings[pick(2)%len(oddStrings)])
	case reflect.Bool:
		v.SetBool(pick(3)%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt([]int64{0, -1, 42, math.MaxInt8}[pick(4)%4])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint([]uint64{0, 1, 255}[pick(5)%3])
	case reflect.Float32, reflect.Float64:
		f := oddFloats[pick(6)%len(oddFloats)]
		if v.Kind() == reflect.Float32 && math.Abs(f) > math.MaxFloat32 {
			f = 1e30
		}
		v.SetFloat(f)
	case reflect.Interface:
		if x := oddValues[pick(7)%len(oddValues)]; x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.Pointer:
		if pick(8)%3 != 0 {
			p := reflect.New(v.Type().Elem())
			fillOdd(p.Elem(), n+1, depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		switch k := pick(9) % 4; k {
		case 0: // nil
		default:
			s := reflect.MakeSlice(v.Type(), k-1, k-1)
			for i := range k - 1 {
				fillOdd(s.Index(i), n+i+1, depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		switch k := pick(10) % 4; k {
		case 0: // nil
		default:
			m := reflect.MakeMap(v.Type())
			for i := range k {
				key := reflect.New(v.Type().Key()).Elem()
				key.SetString(oddStrings[(n+i)%len(oddStrings)])
				val := reflect.New(v.Type().Elem()).Elem()
				fillOdd(val, n+i+1, depth+1)
				m.SetMapIndex(key, val)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillOdd(v.Field(i), n+i, depth+1)
			}
		}
	}
}

// TestAppendJSONIsEncodingJSON: the hand-written encoder writes encoding/json's
// bytes, for the whole envelope and for its brief, for envelopes of every payload type, their fields set to empty, odd
// and ordinary values, as built and as a reader decodes them from the
// stream.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	compare := func(t *testing.T, env *Envelope, p any) {
		t.Helper()
		for _, enc := range []struct {
			name string
			ref  func(*Envelope, any) ([]byte, error)
			got  func([]byte, any) ([]byte, error)
		}{{"AppendJSON", encodingJSON, env.AppendJSON}, {"AppendBriefJSON", briefJSON, env.AppendBriefJSON}} {
			want, wantErr := enc.ref(env, p)
			got, err := enc.got([]byte("prefix"), p)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s %s: error %v, encoding/json's %v", enc.name, env.Type, err, wantErr)
			}
			if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("%s %s:\n got %s\nwant prefix%s", enc.name, env.Type, got, want)
			}
		}
	}
	compared := 0
	for _, typ := range Types() {
		compare(t, fullEnvelope(t, typ), nil) // every field set (the round-trip tests' envelope)
		for n := range 12 {
			p, err := NewPayload(typ)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				fillOdd(reflect.ValueOf(p).Elem(), n, 0)
			}
			env := &Envelope{Schema: Version, ID: NewID(), SessionID: "S1", Source: "user", Type: typ, Timestamp: oddTimes[n%len(oddTimes)]}
			if n%2 == 1 {
				fillOdd(reflect.ValueOf(env).Elem(), n, 0)
				env.Type = typ
			}
			if err := env.SetPayload(p); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			compare(t, env, p)
			compared++
			if n%2 == 1 {
				continue // odd envelope fields a reader refuses
			}
			// As a reader has it: decoded from the envelope's bytes, the
			// payload decoded once (or, with nil, by AppendJSON).
			data, err := AppendMarshal(nil, env)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			read := &Envelope{}
			decoded, err := UnmarshalPayloadInto(data, read)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			compare(t, read, decoded)
			compare(t, read, nil)
			compared += 2
		}
	}
	// A payload that is no registered struct is shown as the generic value
	// it holds; an envelope with no payload shows null.
	for _, x := range oddValues {
		env := &Envelope{Schema: Version, ID: "i", Type: "teleport", Timestamp: oddTimes[0]}
		if err := env.SetPayload(x); err == nil || x == nil {
			compare(t, env, nil)
		}
		compare(t, env, x)
	}
	// What encoding/json refuses, AppendJSON refuses.
	for _, bad := range []any{math.NaN(), math.Inf(1), []any{float32(math.Inf(-1))}} {
		compare(t, &Envelope{Type: "x"}, bad)
	}
	compare(t, &Envelope{Type: "x", Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, nil)
	compare(t, &Envelope{Type: "x", Timestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600))}, nil)
	if compared < 3*len(Types()) {
		t.Fatalf("compared %d envelopes", compared)
	}
}

// TestAppendJSONStringIsEncodingJSON: every byte value, alone and next to
// the odd strings.
func TestAppendJSONStringIsEncodingJSON(t *testing.T) {
	var all []string
	for c := range 256 {
		all = append(all, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"é")
	}
	for _, s := range append(all, oddStrings...) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

// A type with its own MarshalJSON (on the pointer, called only where the
// value is addressable), promoted fields of embedded structs and clashing
// names are encoded as encoding/json encodes them.
type marshalsItself struct{ N int }

func (m *marshalsItself) MarshalJSON() ([]byte, error) { return []byte(`{ "custom" : "<" }`), nil }

type inner struct {
	A string `json:"a"`
	B string
	C string `json:"c,omitempty"`
	D string
}

// other's B (tagged) hides inner's; their D clash and neither is encoded.
type other struct {
	B string `json:"B"`
	D string
}

type outer struct {
	inner
	other
	C  string `json:"c"`
	M  marshalsItself
	MP *marshalsItself
	MS []marshalsItself
	MM map[string]marshalsItself
	K  map[int]string
	X  any `json:"x,omitempty"`
	F  float32
	T  *time.Time `json:",omitempty"`
	Q  int        `json:",string"`
	d  int
	Dd int `json:"-"`
}

func TestAppendJSONOddTypes(t *testing.T) {
	now := oddTimes[0]
	for _, v := range []any{
		outer{},
		&outer{inner: inner{A: "1", B: "2", C: "3", D: "d"}, other: other{B: "5", D: "e"}, C: "6", MP: &marshalsItself{}, MS: []marshalsItself{{}}, MM: map[string]marshalsItself{"k": {}}, K: map[int]string{2: "b", 1: "a"}, X: marshalsItself{}, F: 1e-7, T: &now, Q: 7, d: 1, Dd: 2},
		struct {
			inner
			A string
		}{inner{A: "hidden"}, "shown"},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendAny(nil, v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %s %v\nwant %s", v, got, err, want)
		}
	}
}
