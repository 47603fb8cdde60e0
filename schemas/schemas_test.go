package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite the JSON Schema documents from the Go types")

var fixedTime = time.Date(2026, 11, 21, 9, 30, 0, 123456789, time.UTC)

// fill sets every field of v (a pointer to a struct) to a non-zero value, so a
// round trip proves each field survives.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(fixedTime))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.String:
		v.SetString("value-" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint64:
		v.SetUint(9)
	case reflect.Float64, reflect.Float32:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		key := reflect.New(v.Type().Key()).Elem()
		key.SetString("k")
		val := reflect.New(v.Type().Elem()).Elem()
		if v.Type().Elem().Kind() == reflect.Interface {
			val.Set(reflect.ValueOf("v"))
		} else {
			fill(val)
		}
		m.SetMapIndex(key, val)
		v.Set(m)
	}
}

func fullEnvelope(t testing.TB, typ Type) *Envelope {
	t.Helper()
	p, err := NewPayload(typ)
	if err != nil {
		t.Fatal(err)
	}
	fill(reflect.ValueOf(p))
	env, err := New(typ, "S1", "user", "guide", fixedTime, p)
	if err != nil {
		t.Fatal(err)
	}
	deadline, processed := fixedTime.Add(time.Hour), fixedTime.Add(time.Second)
	env.ParentID = NewID()
	env.Deadline, env.ProcessedAt = &deadline, &processed
	env.TTL = time.Minute
	env.MaxAttempts = 3
	env.Attempt = 1
	env.Metadata = map[string]string{"k": "v"}
	env.Error = "boom"
	env.StructuredIntent = &StructuredIntent{OriginalRequest: "add validation", KeyConstraints: []string{"no new deps"}, SuccessCriteria: []string{"tests pass"}, IntentType: "MODIFY"}
	env.ConfidenceChain = []ConfidenceEntry{{Agent: "guide", Confidence: 0.95, Reason: "clear"}}
	env.RerouteHistory = []RerouteHop{{From: "engineer", Reason: "not mine", To: "architect"}}
	return env
}

func TestRoundTripEveryType(t *testing.T) {
	if len(Types()) < 60 {
		t.Fatalf("catalogue has %d types, want the seed's 45 plus the runtime's", len(Types()))
	}
	for _, typ := range Types() {
		t.Run(string(typ), func(t *testing.T) {
			env := fullEnvelope(t, typ)
			b, err := Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, env) {
				t.Fatalf("round trip changed the envelope:\n got %+v\nwant %+v", got, env)
			}
			want, _ := NewPayload(typ)
			fill(reflect.ValueOf(want))
			p, err := DecodePayload(got)
			if err != nil {
				t.Fatal(err)
			}
			// Payload times decode in the local zone; compare encodings, which
			// hold the instant only.
			gotB, _ := EncodePayload(typ, p)
			wantB, _ := EncodePayload(typ, want)
			if !bytes.Equal(gotB, wantB) || reflect.ValueOf(p).Elem().IsZero() {
				t.Fatalf("payload changed:\n got %#v\nwant %#v", p, want)
			}
		})
	}
}

func TestPayloadAs(t *testing.T) {
	env, err := New(TypeTaskDispatch, "S1", "orchestrator", "engineer", fixedTime, TaskDispatch{DAGID: "d", NodeID: "n", Attempt: 1, Agent: "engineer", Tool: "exec"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := PayloadAs[TaskDispatch](env)
	if err != nil || p.NodeID != "n" {
		t.Fatalf("PayloadAs = %+v, %v", p, err)
	}
	if _, err := PayloadAs[TaskComplete](env); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PayloadAs with the wrong struct: err = %v, want ErrInvalid", err)
	}
}

func TestDeriveKeepsLineage(t *testing.T) {
	parent := fullEnvelope(t, TypeUserInput)
	child, err := parent.Derive(TypePlanRequest, "guide", "architect", fixedTime, PlanRequest{Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if child.ParentID != parent.ID || child.CorrelationID != parent.CorrelationID || child.ID == parent.ID {
		t.Fatalf("child ids = id %s parent %s corr %s; parent id %s corr %s", child.ID, child.ParentID, child.CorrelationID, parent.ID, parent.CorrelationID)
	}
	child.ConfidenceChain = append(child.ConfidenceChain, ConfidenceEntry{Agent: "architect", Confidence: 0.8})
	if len(parent.ConfidenceChain) != 1 {
		t.Fatal("appending to the child's confidence chain changed the parent's")
	}
	if child.StructuredIntent != parent.StructuredIntent {
		t.Fatal("structured intent not carried to the child")
	}
}

func TestIDsAreTimeOrdered(t *testing.T) {
	prev := NewID()
	for range 1000 {
		id := NewID()
		if id <= prev {
			t.Fatalf("id %s not after %s", id, prev)
		}
		prev = id
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Envelope)
		field string
	}{
		{"missing id", func(e *Envelope) { e.ID = "" }, "id"},
		{"id with a dot", func(e *Envelope) { e.ID = "a.b" }, "id"},
		{"id too long", func(e *Envelope) { e.ID = strings.Repeat("a", 65) }, "id"},
		{"missing session", func(e *Envelope) { e.SessionID = "" }, "session_id"},
		{"session with a wildcard", func(e *Envelope) { e.SessionID = "S*" }, "session_id"},
		{"missing source", func(e *Envelope) { e.Source = "" }, "source"},
		{"target with space", func(e *Envelope) { e.Target = "the engineer" }, "target"},
		{"bad parent", func(e *Envelope) { e.ParentID = "p>" }, "parent_id"},
		{"unknown type", func(e *Envelope) { e.Type = "teleport" }, "type"},
		{"confidence above 1", func(e *Envelope) { e.ConfidenceChain[0].Confidence = 1.5 }, "confidence_chain[0].confidence"},
		{"confidence NaN", func(e *Envelope) { e.ConfidenceChain[0].Confidence = nan() }, "confidence_chain[0].confidence"},
		{"missing timestamp", func(e *Envelope) { e.Timestamp = time.Time{} }, "timestamp"},
		{"payload field of the wrong type", func(e *Envelope) { e.Payload, _ = msgpack.Marshal(map[string]any{"text": 42}) }, "payload"},
		{"payload garbage", func(e *Envelope) { e.Payload = msgpack.RawMessage{0xc1} }, "payload"},
		{"payload missing", func(e *Envelope) { e.Payload = nil }, "payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := fullEnvelope(t, TypeUserInput)
			c.edit(env)
			_, err := Marshal(env)
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want a *FieldError matching ErrInvalid", err)
			}
			if fe.Field != c.field {
				t.Fatalf("error names field %q, want %q (%v)", fe.Field, c.field, err)
			}
		})
	}
}

func nan() float64 { var z float64; return z / z }

func TestSystemSessionAllowed(t *testing.T) {
	env, err := New(TypeCircuitChange, SystemSession, "runner", "", fixedTime, CircuitChange{Resource: "exec", From: "closed", To: "open"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Marshal(env); err != nil {
		t.Fatalf("system session refused: %v", err)
	}
}

func TestEncodePayloadRefusesWrongStruct(t *testing.T) {
	if _, err := EncodePayload(TypeUserInput, Notice{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if _, err := EncodePayload("nope", UserInput{}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("err = %v, want ErrUnknownType", err)
	}
}

// A newer writer adds an envelope key and a payload key; an older reader must keep
// both when it re-encodes the event.
func TestUnknownFieldsSurviveReencoding(t *testing.T) {
	env := fullEnvelope(t, TypeUserInput)
	var m map[string]any
	b, _ := Marshal(env)
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["lineage_v2"] = map[string]any{"depth": 3}
	m["payload"].(map[string]any)["language"] = "en"
	newer, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(newer)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := msgpack.Unmarshal(again, &back); err != nil {
		t.Fatal(err)
	}
	if back["lineage_v2"] == nil || back["payload"].(map[string]any)["language"] != "en" {
		t.Fatalf("unknown fields dropped: %v", back)
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":          nil,
		"not a map":      {0x93, 1, 2, 3},
		"json":           []byte(`{"id":"x"}`),
		"truncated":      func() []byte { b, _ := Marshal(fullEnvelope(t, TypeUserInput)); return b[:len(b)/2] }(),
		"trailing bytes": func() []byte { b, _ := Marshal(fullEnvelope(t, TypeUserInput)); return append(b, 0x01) }(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Unmarshal(b)
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrDecode or ErrInvalid", err)
			}
		})
	}
}

func TestMarshalJSONDecodesPayload(t *testing.T) {
	env, _ := New(TypeUserInput, "S1", "user", "", fixedTime, UserInput{Text: "hello"})
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["payload"].(map[string]any)["text"] != "hello" || got["session_id"] != "S1" || got["type"] != "user_input" {
		t.Fatalf("json = %s", b)
	}
}

// FuzzDecode: whatever bytes arrive on the stream, decoding never panics, and
// whatever decodes re-encodes to something that decodes to the same envelope.
func FuzzDecode(f *testing.F) {
	for _, typ := range Types() {
		b, err := Marshal(fullEnvelope(f, typ))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x80})
	f.Add([]byte{0xde, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := Marshal(env)
		if err != nil {
			t.Fatalf("decoded envelope does not re-encode: %v", err)
		}
		env2, err := Unmarshal(again)
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if !reflect.DeepEqual(env, env2) {
			t.Fatalf("re-encoding changed the envelope:\n%+v\n%+v", env, env2)
		}
	})
}

// generateJSONSchema builds the published document of typ from the Go types.
func generateJSONSchema(typ Type) ([]byte, error) {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, AllowAdditionalProperties: true}
	doc := r.Reflect(&Envelope{})
	doc.ID = jsonschema.ID("https://github.com/sylk/sylk/schemas/jsonschema/" + string(typ) + ".json")
	doc.Title = string(typ)
	doc.Description = typ.Doc() + " Keys of newer schema versions may appear and must be kept."
	pt, _ := PayloadType(typ)
	payload := r.ReflectFromType(pt)
	payload.Version, payload.ID = "", ""
	doc.Properties.Set("payload", payload)
	doc.Properties.Set("type", &jsonschema.Schema{Type: "string", Const: string(typ)})
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

func TestJSONSchemasMatchGoTypes(t *testing.T) {
	if *update {
		if err := os.MkdirAll(JSONSchemaDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, typ := range Types() {
		want, err := generateJSONSchema(typ)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(JSONSchemaDir, string(typ)+".json")
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := JSONSchema(typ)
		if err != nil {
			t.Fatalf("%s: %v (run `go test ./schemas -run TestJSONSchemasMatchGoTypes -update`)", typ, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date with the Go types; run `go test ./schemas -run TestJSONSchemasMatchGoTypes -update`", path)
		}
	}
	entries, _ := os.ReadDir(JSONSchemaDir)
	if !*update && len(entries) != len(Types()) {
		t.Errorf("%d documents in %s for %d types: remove the stale ones", len(entries), JSONSchemaDir, len(Types()))
	}
}

// An outside consumer decodes the msgpack body with a generic library and
// validates it against the published document: every encoded type must pass.
func TestEncodedEventsMatchPublishedSchemas(t *testing.T) {
	for _, typ := range Types() {
		doc, err := JSONSchema(typ)
		if err != nil {
			t.Fatal(err)
		}
		schema := compileSchema(t, doc)
		for _, env := range []*Envelope{fullEnvelope(t, typ), minimalEnvelope(t, typ)} {
			b, err := Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(genericJSON(t, b)); err != nil {
				t.Fatalf("%s: encoded event fails its published schema: %v", typ, err)
			}
		}
	}
	// And the schemas do constrain: a user_input body fails the checkpoint schema.
	doc, _ := JSONSchema(TypeCheckpoint)
	b, _ := Marshal(fullEnvelope(t, TypeUserInput))
	if err := compileSchema(t, doc).Validate(genericJSON(t, b)); err == nil {
		t.Fatal("a user_input event validated against the checkpoint schema")
	}
}

func minimalEnvelope(t *testing.T, typ Type) *Envelope {
	p, _ := NewPayload(typ)
	env, err := New(typ, "S1", "user", "", fixedTime, p)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func compileSchema(t *testing.T, doc []byte) *sjs.Schema {
	t.Helper()
	v, err := sjs.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := sjs.NewCompiler()
	if err := c.AddResource("mem://schema.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// genericJSON decodes msgpack with no knowledge of Sylk's types, the way an outside
// consumer would, and returns the JSON value the schema validator reads.
func genericJSON(t *testing.T, b []byte) any {
	t.Helper()
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sjs.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDeriveIDIsDeterministicAndDistinct(t *testing.T) {
	parent := fullEnvelope(t, TypeTaskDispatch)
	a, b := DeriveID(parent, "out/0"), DeriveID(parent, "out/0")
	if a != b {
		t.Fatalf("DeriveID not deterministic: %s %s", a, b)
	}
	if c := DeriveID(parent, "out/1"); c == a {
		t.Fatal("different keys gave the same id")
	}
	other := fullEnvelope(t, TypeTaskDispatch)
	if DeriveID(other, "out/0") == a {
		t.Fatal("different parents gave the same id")
	}
	if !ValidName(a) || a[14] != '8' {
		t.Fatalf("derived id %q is not a valid version-8 id", a)
	}
	// A parent with a UUID id: the derived id starts with that id's time,
	// whenever the parent was stamped, so a re-execution that handles the
	// same message later derives the same id.
	parent.ID = NewID()
	restamped := *parent
	restamped.Timestamp = parent.Timestamp.Add(time.Hour)
	if x, y := DeriveID(parent, "x"), DeriveID(&restamped, "x"); x != y || x[:13] != parent.ID[:13] {
		t.Fatalf("derived ids %s, %s: want the same, starting with the parent's time %s", x, y, parent.ID[:13])
	}
	// Any other id: it sorts with its parent's timestamp, after ids made a
	// second earlier.
	parent.ID = "e0001"
	earlier := *parent
	earlier.Timestamp = parent.Timestamp.Add(-time.Second)
	if DeriveID(&earlier, "x") >= DeriveID(parent, "x") {
		t.Fatal("derived ids do not follow their parent's time")
	}
}

// UnmarshalPayloadInto gives what Unmarshal and DecodePayload return together,
// whatever the order of the envelope's keys (another encoder may write the
// payload before the type), into an envelope that held another, and refuses
// what Unmarshal refuses, with the same error.
func TestUnmarshalPayloadIsUnmarshalAndDecodePayload(t *testing.T) {
	for _, typ := range Types() {
		ours, err := Marshal(fullEnvelope(t, typ))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{ours, sortedKeys(t, ours)} {
			checkUnmarshalPayload(t, typ, b)
		}
	}
	good, _ := Marshal(fullEnvelope(t, TypeUserInput))
	wrong := fullEnvelope(t, TypeDAGExecute)
	wrong.Payload, _ = msgpack.Marshal(map[string]any{"dag": 5})
	badPayload, _ := AppendMarshal(nil, wrong)
	for name, b := range map[string][]byte{
		"empty":                        nil,
		"truncated":                    good[:len(good)/2],
		"trailing bytes":               append(bytes.Clone(good), 0x01),
		"payload of a different shape": badPayload,
	} {
		_, wantErr := Unmarshal(b)
		var env Envelope
		p, err := UnmarshalPayloadInto(b, &env)
		if wantErr == nil || err == nil || err.Error() != wantErr.Error() || p != nil {
			t.Errorf("%s: UnmarshalPayloadInto = %v, %v; Unmarshal's error %v", name, p, err, wantErr)
		}
	}
}

func checkUnmarshalPayload(t *testing.T, typ Type, b []byte) {
	t.Helper()
	want, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	wantP, _ := DecodePayload(want)
	got := fullEnvelope(t, TypeDAGExecute) // reset first: nothing of it stays
	p, err := UnmarshalPayloadInto(b, got)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: envelope\n got %+v\nwant %+v", typ, got, want)
	}
	gotB, _ := EncodePayload(typ, p)
	wantB, _ := EncodePayload(typ, wantP)
	if p == nil || reflect.TypeOf(p) != reflect.TypeOf(wantP) || !bytes.Equal(gotB, wantB) {
		t.Fatalf("%s: payload %#v, want %#v", typ, p, wantP)
	}
}

// sortedKeys re-encodes an envelope with its keys in sorted order, as a
// generic encoder might: "payload" then comes before "type".
func sortedKeys(t *testing.T, b []byte) []byte {
	t.Helper()
	var m map[string]msgpack.RawMessage
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(m))
	if slices.Index(keys, "payload") > slices.Index(keys, "type") {
		t.Fatalf("sorted keys %v do not put the payload first", keys)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(len(keys)); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := errors.Join(enc.EncodeString(k), enc.Encode(m[k])); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// A decoder interns the envelope's names: the same source, target, type and
// status decoded again are the same strings, whether short (fixstr) or long
// (str8), and past maxNames new names still decode, uninterned.
func TestDecoderInternsNames(t *testing.T) {
	s := decoders.New().(*decoderState)
	decode := func(source string) *Envelope {
		t.Helper()
		env := fullEnvelope(t, TypeUserInput)
		env.Source, env.Target, env.Status = source, strings.Repeat("t", 40), StatusPending
		b, err := Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		s.rd.Reset(b)
		s.dec.Reset(&s.rd)
		var got Envelope
		if _, err := decodeEnvelope(s, b, &got, true); err != nil {
			t.Fatal(err)
		}
		if got.Source != env.Source || got.Target != env.Target || got.Type != env.Type || got.Status != env.Status {
			t.Fatalf("decoded %q %q %q %q, want %q %q %q %q", got.Source, got.Target, got.Type, got.Status, env.Source, env.Target, env.Type, env.Status)
		}
		return &got
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	a, b := decode("engineer"), decode("engineer")
	if !same(a.Source, b.Source) || !same(a.Target, b.Target) || !same(string(a.Type), string(b.Type)) || !same(string(a.Status), string(b.Status)) {
		t.Fatal("names decoded twice are not interned")
	}
	for i := len(s.names); i <= maxNames; i++ {
		decode(fmt.Sprintf("agent%d", i))
	}
	if len(s.names) != maxNames {
		t.Fatalf("%d names interned, want at most %d", len(s.names), maxNames)
	}
	if a, b := decode("late"), decode("late"); same(a.Source, b.Source) {
		t.Fatal("a name past the bound was interned")
	}
}

// A tool call's target is its command line, words of any type as fmt
// prints them, else its command, else its path and pattern; reading a
// command line costs one allocation.
func TestToolTarget(t *testing.T) {
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"argv": []any{"go", "test", "./pkg3"}}, "go test ./pkg3"},
		{map[string]any{"argv": []any{"sleep", int8(3), 1.5, true, nil, ""}, "command": "ignored"}, "sleep 3 1.5 true <nil> "},
		{map[string]any{"argv": []any{}}, ""},
		{map[string]any{"command": "make test"}, "make test"},
		{map[string]any{"path": "a.go", "pattern": "func", "command": ""}, "a.go func"},
		{nil, ""},
	} {
		if got := ToolTarget(c.args); got != c.want {
			t.Errorf("ToolTarget(%v) = %q, want %q", c.args, got, c.want)
		}
	}
	args := map[string]any{"argv": []any{"go", "test", "./pkg3"}}
	if n := testing.AllocsPerRun(100, func() { ToolTarget(args) }); n != 1 {
		t.Errorf("a command line of strings: %v allocations, want 1", n)
	}
}

// A tool result's time comes from its microseconds, and from its milliseconds
// for a result recorded before the microseconds were.
func TestToolResultSeconds(t *testing.T) {
	for _, c := range []struct {
		r    ToolResult
		want float64
	}{
		{ToolResult{DurationMS: 0, DurationUS: 40}, 40e-6},
		{ToolResult{DurationMS: 1234, DurationUS: 1234567}, 1.234567},
		{ToolResult{DurationMS: 412}, 0.412},
	} {
		if got := c.r.Seconds(); got != c.want {
			t.Errorf("%+v: %v s, want %v", c.r, got, c.want)
		}
	}
}
