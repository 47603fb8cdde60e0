package schemas

import (
	"cmp"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// The JSON of an envelope (`sylk tail --json`, the web view's live events)
// is written by hand: encoding/json spent most of an event's encoding in
// reflection over the envelope, in time.Time's MarshalJSON and in
// re-validating what that method returned. The bytes are encoding/json's,
// byte for byte (TestAppendJSONIsEncodingJSON compares both over every
// payload type): the same field order, omitempty, HTML-safe string escapes,
// float format and sorted map keys. A type this encoder does not know (one
// with its own MarshalJSON or MarshalText, a map keyed by something other
// than a string, a struct tag option it does not handle) is handed to
// encoding/json, so the bytes stay the same when a payload grows one.

// AppendJSON appends the envelope's JSON, its payload decoded (MarshalJSON's
// bytes), to b. p is the payload already decoded (as UnmarshalPayloadInto
// returns it), so that a reader that has it does not decode it again; with
// a nil p it is decoded here.
func (e *Envelope) AppendJSON(b []byte, p any) ([]byte, error) {
	if p == nil {
		p = e.anyPayload()
	}
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, int64(e.Schema), 10)
	b = appendField(b, "id", e.ID, false)
	b = appendField(b, "correlation_id", e.CorrelationID, true)
	b = appendField(b, "parent_id", e.ParentID, true)
	b, err := e.appendRoute(append(b, ','))
	if err != nil {
		return nil, err
	}
	if e.Deadline != nil {
		b = append(b, `,"deadline":`...)
		if b, err = appendTime(b, *e.Deadline); err != nil {
			return nil, err
		}
	}
	if e.TTL != 0 {
		b = append(b, `,"ttl":`...)
		b = strconv.AppendInt(b, int64(e.TTL), 10)
	}
	b = appendField(b, "status", string(e.Status), true)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	if e.MaxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(e.MaxAttempts), 10)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(e.Priority), 10)
	// The rest are rare: the reflective encoder writes them.
	for _, f := range []struct {
		key   string
		v     any
		empty bool
	}{
		{`,"metadata":`, e.Metadata, len(e.Metadata) == 0},
		{`,"error":`, e.Error, e.Error == ""},
		{`,"processed_at":`, e.ProcessedAt, e.ProcessedAt == nil},
		{`,"structured_intent":`, e.StructuredIntent, e.StructuredIntent == nil},
		{`,"confidence_chain":`, e.ConfidenceChain, len(e.ConfidenceChain) == 0},
		{`,"reroute_history":`, e.RerouteHistory, len(e.RerouteHistory) == 0},
	} {
		if f.empty {
			continue
		}
		b = append(b, f.key...)
		if b, err = appendAny(b, f.v); err != nil {
			return nil, err
		}
	}
	// The payload comes last, where the decoded payload took the raw one's
	// place when encoding/json wrote it.
	return appendPayload(b, p)
}

// AppendBriefJSON appends what a person watching the stream reads of the
// envelope (the web view's live events): {"session_id", "source", "target"
// (omitted when empty), "type", "timestamp", "payload"}, each as AppendJSON
// writes it, p as AppendJSON takes it. The ids, the delivery fields and the
// rest are left out: less than half the bytes of an ordinary event, to
// encode and to send to every page.
func (e *Envelope) AppendBriefJSON(b []byte, p any) ([]byte, error) {
	if p == nil {
		p = e.anyPayload()
	}
	b, err := e.appendRoute(append(b, '{'))
	if err != nil {
		return nil, err
	}
	return appendPayload(b, p)
}

// appendRoute appends the session, source, target (if any), type and
// timestamp fields, the first without a comma before it.
func (e *Envelope) appendRoute(b []byte) ([]byte, error) {
	b = append(b, `"session_id":`...)
	b = AppendJSONString(b, e.SessionID)
	b = appendField(b, "source", e.Source, false)
	b = appendField(b, "target", e.Target, true)
	b = appendField(b, "type", string(e.Type), false)
	b = append(b, `,"timestamp":`...)
	return appendTime(b, e.Timestamp)
}

// appendPayload appends the payload field, last, and closes the object.
func appendPayload(b []byte, p any) ([]byte, error) {
	b = append(b, `,"payload":`...)
	b, err := appendAny(b, p)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendField appends `,"key":"value"`, or nothing for an empty value that
// is omitted.
func appendField(b []byte, key, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return AppendJSONString(b, value)
}

// appendAny appends v as encoding/json encodes it.
func appendAny(b []byte, v any) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	rv := reflect.ValueOf(v)
	return encoderOf(rv.Type())(b, rv)
}

// AppendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters, the HTML
// characters <, > and &, U+2028 and U+2029, and each byte of invalid UTF-8
// as U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainASCII are the ASCII bytes a JSON string holds as they are.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendTime appends t as time.Time's MarshalJSON does: RFC 3339 with
// nanoseconds, quoted. A time RFC 3339 cannot hold (a year beyond 9999, a
// zone offset of a day or more) is left to that method, which refuses it.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, timeError(t)
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return nil, timeError(t)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

func timeError(t time.Time) error {
	_, err := t.MarshalJSON()
	return err
}

// encoderFunc appends v's JSON to b.
type encoderFunc func(b []byte, v reflect.Value) ([]byte, error)

// typeEncoders holds each type's encoderFunc, built on first use.
var typeEncoders sync.Map // reflect.Type → encoderFunc

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
)

func encoderOf(t reflect.Type) encoderFunc {
	if f, ok := typeEncoders.Load(t); ok {
		return f.(encoderFunc)
	}
	// A type that holds itself (a tree) finds this stand-in while its
	// encoder is built; it waits for the real one.
	var (
		wg sync.WaitGroup
		f  encoderFunc
	)
	wg.Add(1)
	stand, loaded := typeEncoders.LoadOrStore(t, encoderFunc(func(b []byte, v reflect.Value) ([]byte, error) {
		wg.Wait()
		return f(b, v)
	}))
	if loaded {
		return stand.(encoderFunc)
	}
	f = newEncoder(t)
	wg.Done()
	typeEncoders.Store(t, f)
	return f
}

func newEncoder(t reflect.Type) encoderFunc {
	if t == timeType {
		return func(b []byte, v reflect.Value) ([]byte, error) {
			return appendTime(b, v.Interface().(time.Time))
		}
	}
	if t.Kind() == reflect.Pointer {
		// A method of the pointer's or of its element's is called for the
		// element, which is addressable: encoding/json's bytes either way.
		elem := encoderOf(t.Elem())
		return func(b []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(b, "null"...), nil
			}
			return elem(b, v.Elem())
		}
	}
	if marshals(t) {
		return encodeByEncodingJSON
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(b []byte, v reflect.Value) ([]byte, error) { return strconv.AppendBool(b, v.Bool()), nil }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(b []byte, v reflect.Value) ([]byte, error) { return strconv.AppendInt(b, v.Int(), 10), nil }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(b []byte, v reflect.Value) ([]byte, error) { return strconv.AppendUint(b, v.Uint(), 10), nil }
	case reflect.Float32, reflect.Float64:
		return floatEncoder(t.Bits())
	case reflect.String:
		return func(b []byte, v reflect.Value) ([]byte, error) { return AppendJSONString(b, v.String()), nil }
	case reflect.Interface:
		return func(b []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(b, "null"...), nil
			}
			e := v.Elem()
			return encoderOf(e.Type())(b, e)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !marshals(t.Elem()) {
			return encodeBytes
		}
		return sliceEncoder(t)
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return mapEncoder(t)
		}
	case reflect.Struct:
		if f := structEncoder(t); f != nil {
			return f
		}
	}
	return encodeByEncodingJSON
}

// marshals says whether encoding/json would call a method of t's (or of
// *t's, where the value is addressable) to encode it.
func marshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(marshalerType) || t.Implements(textMarshalerType) ||
		p.Implements(marshalerType) || p.Implements(textMarshalerType)
}

// encodeByEncodingJSON hands a value this encoder does not know to
// encoding/json, addressable as it is (a method on the pointer is called
// only then).
func encodeByEncodingJSON(b []byte, v reflect.Value) ([]byte, error) {
	x := v.Interface()
	if v.CanAddr() {
		x = v.Addr().Interface()
	}
	j, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

func floatEncoder(bits int) encoderFunc {
	return func(b []byte, v reflect.Value) ([]byte, error) {
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return encodeByEncodingJSON(b, v) // its error names the value
		}
		// encoding/json's choice: exponent notation only for very small or
		// very large numbers, with the exponent's leading zero dropped.
		abs := math.Abs(f)
		format := byte('f')
		if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
			format = 'e'
		}
		b = strconv.AppendFloat(b, f, format, -1, bits)
		if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b, nil
	}
}

func encodeBytes(b []byte, v reflect.Value) ([]byte, error) {
	if v.IsNil() {
		return append(b, "null"...), nil
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v.Bytes())
	return append(b, '"'), nil
}

func sliceEncoder(t reflect.Type) encoderFunc {
	elem := encoderOf(t.Elem())
	return func(b []byte, v reflect.Value) ([]byte, error) {
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = elem(b, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
}

// mapEncoder encodes a map keyed by strings, its keys sorted.
func mapEncoder(t reflect.Type) encoderFunc {
	elem := encoderOf(t.Elem())
	return func(b []byte, v reflect.Value) ([]byte, error) {
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, k.String())
			b = append(b, ':')
			var err error
			if b, err = elem(b, v.MapIndex(k)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
}

// field is a struct field as encoding/json names it.
type field struct {
	name      string
	key       string // `"name":`, escaped
	index     []int  // through embedded structs
	tagged    bool
	omitEmpty bool
	typ       reflect.Type
	enc       encoderFunc
}

// structEncoder encodes a struct's fields as encoding/json selects them
// (the embedded structs' fields promoted, a name taken by the shallowest
// field, or the tagged one among equals), or returns nil for a struct it
// does not know how to (an embedded pointer, an option other than
// omitempty).
func structEncoder(t reflect.Type) encoderFunc {
	var all []field
	if !collectFields(t, nil, &all) {
		return nil
	}
	byName := map[string][]field{}
	for _, f := range all {
		byName[f.name] = append(byName[f.name], f)
	}
	var fields []field
	for _, same := range byName {
		slices.SortStableFunc(same, func(x, y field) int {
			if c := cmp.Compare(len(x.index), len(y.index)); c != 0 {
				return c
			}
			if x.tagged != y.tagged {
				if x.tagged {
					return -1
				}
				return 1
			}
			return 0
		})
		if len(same) > 1 && len(same[0].index) == len(same[1].index) && same[0].tagged == same[1].tagged {
			continue // neither dominates: encoding/json drops both
		}
		fields = append(fields, same[0])
	}
	slices.SortFunc(fields, func(x, y field) int { return slices.Compare(x.index, y.index) })
	for i := range fields {
		f := &fields[i]
		f.key = string(AppendJSONString(nil, f.name)) + ":"
		f.enc = encoderOf(f.typ)
	}
	return func(b []byte, v reflect.Value) ([]byte, error) {
		b = append(b, '{')
		first := true
		for i := range fields {
			f := &fields[i]
			fv := v.FieldByIndex(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, f.key...)
			var err error
			if b, err = f.enc(b, fv); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
}

// collectFields gathers t's encoded fields, index their path from the
// outer struct, and says false where encoding/json would do what this
// encoder does not.
func collectFields(t reflect.Type, index []int, out *[]field) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validTag(name) {
			name = ""
		}
		idx := append(slices.Clip(index), i)
		if sf.Anonymous {
			switch {
			case sf.Type.Kind() == reflect.Pointer:
				return false
			case !sf.IsExported() && sf.Type.Kind() != reflect.Struct:
				continue
			case name == "" && sf.Type.Kind() == reflect.Struct:
				if !collectFields(sf.Type, idx, out) {
					return false
				}
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		omitEmpty := false
		for opts != "" {
			var o string
			o, opts, _ = strings.Cut(opts, ",")
			switch o {
			case "omitempty":
				omitEmpty = true
			case "string", "omitzero":
				return false
			}
		}
		f := field{name: name, tagged: name != "", index: idx, omitEmpty: omitEmpty, typ: sf.Type}
		if name == "" {
			f.name = sf.Name
		}
		*out = append(*out, f)
	}
	return true
}

// validTag is encoding/json's test of a tag's name: otherwise the field's
// own name is used.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// isEmpty is omitempty's test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
