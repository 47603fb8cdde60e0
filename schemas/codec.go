package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The envelope codec is written by hand: it is on every hot path, and walking the
// fields ourselves is what lets unknown keys from newer schema versions survive a
// decode/encode round trip. Payload structs use msgpack's reflection with the json
// tags, so one set of tags serves msgpack, JSON and the JSON Schema documents.

const structTag = "json"

type encoderState struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoders = sync.Pool{New: func() any {
	s := &encoderState{}
	s.enc = msgpack.NewEncoder(&s.buf)
	s.enc.SetCustomStructTag(structTag)
	s.enc.UseCompactInts(true)
	return s
}}

type decoderState struct {
	rd  bytes.Reader
	dec *msgpack.Decoder
	// names interns the envelope's strings drawn from small sets (type,
	// source, target, status): a decode finds them here instead of
	// allocating each, and a fold of the stream decodes one envelope per
	// message. At most maxNames, the first ones seen.
	names map[string]string
}

// maxNames bounds a decoder's interned names: agents' names and the
// catalogue's types are a few dozen.
const maxNames = 256

var decoders = sync.Pool{New: func() any {
	s := &decoderState{}
	s.dec = msgpack.NewDecoder(&s.rd)
	s.dec.SetCustomStructTag(structTag)
	return s
}}

func getDecoder(b []byte) *decoderState {
	s := decoders.Get().(*decoderState)
	s.rd.Reset(b)
	s.dec.Reset(&s.rd)
	s.dec.SetCustomStructTag(structTag)
	return s
}

// Marshal validates env and returns its msgpack encoding.
func Marshal(env *Envelope) ([]byte, error) {
	if err := Validate(env); err != nil {
		return nil, err
	}
	return AppendMarshal(nil, env)
}

// AppendMarshal appends the msgpack encoding of env to dst without validating it.
// Callers that have validated env already (the event log's batch path) use it to
// avoid a second check and an allocation.
func AppendMarshal(dst []byte, env *Envelope) ([]byte, error) {
	s := encoders.Get().(*encoderState)
	defer encoders.Put(s)
	s.buf.Reset()
	if err := encodeEnvelope(s.enc, env); err != nil {
		return nil, err
	}
	return append(dst, s.buf.Bytes()...), nil
}

// fieldWriter writes map entries and keeps the first error, so the envelope
// encoder reads as a list of fields.
type fieldWriter struct {
	e   *msgpack.Encoder
	err error
}

func (w *fieldWriter) key(k string) bool {
	if w.err == nil {
		w.err = w.e.EncodeString(k)
	}
	return w.err == nil
}

func (w *fieldWriter) plain(s string) {
	if w.err == nil {
		w.err = w.e.EncodeString(s)
	}
}

func (w *fieldWriter) str(k, v string) {
	if w.key(k) {
		w.err = w.e.EncodeString(v)
	}
}

func (w *fieldWriter) int(k string, v int64) {
	if w.key(k) {
		w.err = w.e.EncodeInt(v)
	}
}

func (w *fieldWriter) time(k string, v time.Time) {
	if w.key(k) {
		w.err = w.e.EncodeTime(v)
	}
}

func (w *fieldWriter) value(k string, v any) {
	if w.key(k) {
		w.err = w.e.Encode(v)
	}
}

func (w *fieldWriter) raw(k string, v []byte) {
	if !w.key(k) {
		return
	}
	if len(v) == 0 {
		w.err = w.e.EncodeNil()
		return
	}
	_, w.err = w.e.Writer().Write(v)
}

func encodeEnvelope(e *msgpack.Encoder, env *Envelope) error {
	n := 9 + len(env.Unknown) // nine keys are always written
	for _, present := range [...]bool{
		env.CorrelationID != "", env.ParentID != "", env.Target != "", env.Deadline != nil,
		env.TTL != 0, env.Status != "", env.MaxAttempts != 0, len(env.Metadata) > 0,
		env.Error != "", env.ProcessedAt != nil, env.StructuredIntent != nil,
		len(env.ConfidenceChain) > 0, len(env.RerouteHistory) > 0,
	} {
		if present {
			n++
		}
	}
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	w := fieldWriter{e: e}
	w.int("schema", int64(env.Schema))
	w.str("id", env.ID)
	if env.CorrelationID != "" {
		w.str("correlation_id", env.CorrelationID)
	}
	if env.ParentID != "" {
		w.str("parent_id", env.ParentID)
	}
	w.str("session_id", env.SessionID)
	w.str("source", env.Source)
	if env.Target != "" {
		w.str("target", env.Target)
	}
	w.str("type", string(env.Type))
	w.raw("payload", env.Payload)
	w.time("timestamp", env.Timestamp)
	if env.Deadline != nil {
		w.time("deadline", *env.Deadline)
	}
	if env.TTL != 0 {
		w.int("ttl", int64(env.TTL))
	}
	if env.Status != "" {
		w.str("status", string(env.Status))
	}
	w.int("attempt", int64(env.Attempt))
	if env.MaxAttempts != 0 {
		w.int("max_attempts", int64(env.MaxAttempts))
	}
	w.int("priority", int64(env.Priority))
	if len(env.Metadata) > 0 && w.key("metadata") {
		w.err = e.EncodeMapLen(len(env.Metadata))
		for _, k := range slices.Sorted(maps.Keys(env.Metadata)) {
			w.plain(k)
			w.plain(env.Metadata[k])
		}
	}
	if env.Error != "" {
		w.str("error", env.Error)
	}
	if env.ProcessedAt != nil {
		w.time("processed_at", *env.ProcessedAt)
	}
	if env.StructuredIntent != nil {
		w.value("structured_intent", env.StructuredIntent)
	}
	if len(env.ConfidenceChain) > 0 && w.key("confidence_chain") {
		w.err = e.EncodeArrayLen(len(env.ConfidenceChain))
		for _, c := range env.ConfidenceChain {
			if w.err == nil {
				w.err = e.EncodeMapLen(3)
			}
			w.str("agent", c.Agent)
			if w.key("confidence") {
				w.err = e.EncodeFloat64(c.Confidence)
			}
			w.str("reason", c.Reason)
		}
	}
	if len(env.RerouteHistory) > 0 {
		w.value("reroute_history", env.RerouteHistory)
	}
	for _, k := range slices.Sorted(maps.Keys(env.Unknown)) {
		w.raw(k, env.Unknown[k])
	}
	return w.err
}

// Unmarshal decodes and validates an envelope. Any failure is an error wrapping
// ErrDecode or ErrInvalid that says what was wrong; it never panics, whatever b is.
func Unmarshal(b []byte) (*Envelope, error) {
	env := &Envelope{}
	if err := UnmarshalInto(b, env); err != nil {
		return nil, err
	}
	return env, nil
}

// UnmarshalInto is Unmarshal into a caller-owned envelope, which is reset first.
func UnmarshalInto(b []byte, env *Envelope) error {
	_, err := unmarshal(b, env, false)
	return err
}

// UnmarshalPayloadInto is UnmarshalInto that also returns the payload decoded
// into its registered struct (a pointer, as DecodePayload returns).
// Validating an envelope decodes its payload anyway: a reader that needs the
// payload (the projector) keeps that decode instead of doing it twice, in the
// same pass as the envelope, and can hold the envelope in a struct of its own.
// The envelope's Payload aliases b: b must not change while the envelope is in
// use. Errors are those of Unmarshal; after one, env holds nothing useful.
func UnmarshalPayloadInto(b []byte, env *Envelope) (any, error) {
	return unmarshal(b, env, true)
}

// unmarshal decodes b into env and validates it; with payload, the payload
// decode that validates it is returned.
func unmarshal(b []byte, env *Envelope, payload bool) (any, error) {
	*env = Envelope{}
	s := getDecoder(b)
	p, err := decodeEnvelope(s, b, env, payload)
	if err == nil && s.rd.Len() != 0 {
		err = fmt.Errorf("%d trailing bytes after the envelope", s.rd.Len())
	}
	decoders.Put(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if payload && p == nil && len(env.Payload) > 0 {
		// Another encoder put the type after the payload (or the payload does
		// not decode, and Validate says why).
		if v, err := NewPayload(env.Type); err == nil && decodePayloadInto(env, v) == nil {
			env.checked, p = env.Payload, v
		}
	}
	return p, Validate(env)
}

// decodeEnvelope decodes the envelope at the start of b into env. With
// payload, a payload whose type is known by then (the encoder writes type
// before payload) is decoded into its registered struct in the same pass and
// returned, and env.Payload aliases b; otherwise env.Payload is a copy. A
// payload that does not decode is kept as bytes, for Validate to say what is
// wrong with it.
func decodeEnvelope(s *decoderState, b []byte, env *Envelope, payload bool) (any, error) {
	d, rd := s.dec, &s.rd
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil, fmt.Errorf("envelope is not a map: %w", err)
	}
	if n < 0 {
		return nil, errors.New("envelope is nil")
	}
	var p any
	for range n {
		key, err := readKey(d, rd, b)
		if err != nil {
			return nil, fmt.Errorf("envelope key: %w", err)
		}
		if string(key) != "payload" {
			if err := decodeField(s, b, env, key); err != nil {
				return nil, fmt.Errorf("field %q: %w", key, err)
			}
			continue
		}
		if payload {
			v, err := decodePayloadInPlace(d, rd, b, env)
			if err != nil {
				return nil, err
			}
			if v != nil {
				p = v
				continue
			}
		}
		// Slice the payload out of the input instead of recording it through
		// the decoder: one copy, no per-token allocations.
		start := len(b) - rd.Len()
		if err := d.Skip(); err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
		env.Payload = bytes.Clone(b[start : len(b)-rd.Len()])
	}
	return p, nil
}

// decodePayloadInPlace decodes the payload at the reader into the struct of
// env.Type, known by now when the encoder wrote the type first, and slices its
// bytes out of b. It returns nil, with the reader back at the payload, when
// the type is not known yet or the payload does not decode.
func decodePayloadInPlace(d *msgpack.Decoder, rd *bytes.Reader, b []byte, env *Envelope) (any, error) {
	t, ok := PayloadType(env.Type)
	if !ok {
		return nil, nil
	}
	v := reflect.New(t).Interface()
	start := len(b) - rd.Len()
	if d.Decode(v) == nil {
		end := len(b) - rd.Len()
		env.Payload = b[start:end:end]
		env.checked = env.Payload // Validate need not decode it again
		return v, nil
	}
	if _, err := rd.Seek(int64(start), io.SeekStart); err != nil {
		return nil, err
	}
	d.ResetReader(rd)
	return nil, nil
}

// readKey returns the next map key. Envelope keys are short (msgpack fixstr), so
// they are sliced out of the input rather than allocated as strings.
func readKey(d *msgpack.Decoder, rd *bytes.Reader, b []byte) ([]byte, error) {
	if k, ok, err := readStr(rd, b); ok || err != nil {
		return k, err
	}
	s, err := d.DecodeString()
	return []byte(s), err
}

// readStr slices the next value of b out of it when it is a short string
// (msgpack fixstr or str8), moving rd past it; ok is false, and rd is where
// it was, for any other value.
func readStr(rd *bytes.Reader, b []byte) (v []byte, ok bool, err error) {
	const fixStrLow, fixStrHigh, str8 = 0xa0, 0xbf, 0xd9
	start := len(b) - rd.Len()
	if start >= len(b) {
		return nil, false, nil
	}
	var n, head int
	switch c := b[start]; {
	case c >= fixStrLow && c <= fixStrHigh:
		n, head = int(c&0x1f), 1
	case c == str8 && start+1 < len(b):
		n, head = int(b[start+1]), 2
	default:
		return nil, false, nil
	}
	if start+head+n > len(b) {
		return nil, false, errors.New("string runs past the end of the input")
	}
	if _, err := rd.Seek(int64(head+n), io.SeekCurrent); err != nil {
		return nil, false, err
	}
	return b[start+head : start+head+n], true, nil
}

// name decodes the next string of b, a name from a small set, interned.
func (s *decoderState) name(b []byte) (string, error) {
	v, ok, err := readStr(&s.rd, b)
	if err != nil {
		return "", err
	}
	if !ok {
		return s.dec.DecodeString()
	}
	if n, ok := s.names[string(v)]; ok {
		return n, nil
	}
	n := string(v)
	if s.names == nil {
		s.names = make(map[string]string)
	}
	if len(s.names) < maxNames {
		s.names[n] = n
	}
	return n, nil
}

func decodeField(s *decoderState, b []byte, env *Envelope, key []byte) error {
	d := s.dec
	var err error
	switch string(key) {
	case "schema":
		env.Schema, err = d.DecodeInt()
	case "id":
		env.ID, err = d.DecodeString()
	case "correlation_id":
		env.CorrelationID, err = d.DecodeString()
	case "parent_id":
		env.ParentID, err = d.DecodeString()
	case "session_id":
		env.SessionID, err = d.DecodeString()
	case "source":
		env.Source, err = s.name(b)
	case "target":
		env.Target, err = s.name(b)
	case "type":
		var t string
		t, err = s.name(b)
		env.Type = Type(t)
	case "timestamp":
		env.Timestamp, err = d.DecodeTime()
		env.Timestamp = env.Timestamp.UTC()
	case "deadline":
		env.Deadline, err = decodeTimePtr(d)
	case "ttl":
		var v int64
		v, err = d.DecodeInt64()
		env.TTL = time.Duration(v)
	case "status":
		var st string
		st, err = s.name(b)
		env.Status = Status(st)
	case "attempt":
		env.Attempt, err = d.DecodeInt()
	case "max_attempts":
		env.MaxAttempts, err = d.DecodeInt()
	case "priority":
		var p int
		p, err = d.DecodeInt()
		env.Priority = Priority(p)
	case "metadata":
		env.Metadata, err = decodeStringMap(d)
	case "error":
		env.Error, err = d.DecodeString()
	case "processed_at":
		env.ProcessedAt, err = decodeTimePtr(d)
	case "structured_intent":
		err = d.Decode(&env.StructuredIntent)
	case "confidence_chain":
		env.ConfidenceChain, err = decodeConfidenceChain(d)
	case "reroute_history":
		err = d.Decode(&env.RerouteHistory)
	default:
		var raw msgpack.RawMessage
		raw, err = d.DecodeRaw()
		if err == nil {
			if env.Unknown == nil {
				env.Unknown = make(map[string]msgpack.RawMessage)
			}
			env.Unknown[string(key)] = raw
		}
	}
	return err
}

func decodeStringMap(d *msgpack.Decoder) (map[string]string, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	m := make(map[string]string, min(n, 64))
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			return nil, err
		}
		if m[k], err = d.DecodeString(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// decodeConfidenceChain is the hand-written form of d.Decode(&chain): the chain
// rides on most events, and reflection doubled the cost of decoding it.
func decodeConfidenceChain(d *msgpack.Decoder) ([]ConfidenceEntry, error) {
	n, err := d.DecodeArrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	chain := make([]ConfidenceEntry, 0, min(n, 64))
	for range n {
		var c ConfidenceEntry
		fields, err := d.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		for range fields {
			k, err := d.DecodeString()
			if err != nil {
				return nil, err
			}
			switch k {
			case "agent":
				c.Agent, err = d.DecodeString()
			case "confidence":
				c.Confidence, err = d.DecodeFloat64()
			case "reason":
				c.Reason, err = d.DecodeString()
			default:
				err = d.Skip()
			}
			if err != nil {
				return nil, err
			}
		}
		chain = append(chain, c)
	}
	return chain, nil
}

func decodeTimePtr(d *msgpack.Decoder) (*time.Time, error) {
	t, err := d.DecodeTime()
	if err != nil || t.IsZero() {
		return nil, err
	}
	t = t.UTC()
	return &t, nil
}

// EncodePayload returns the msgpack encoding of p, which must be the payload struct
// registered for t (or a pointer to it).
func EncodePayload(t Type, p any) (msgpack.RawMessage, error) {
	want, ok := PayloadType(t)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, string(t))
	}
	got := reflect.TypeOf(p)
	if got != nil && got.Kind() == reflect.Pointer {
		got = got.Elem()
	}
	if got != want {
		return nil, &FieldError{Field: "payload", Value: fmt.Sprint(got), Reason: fmt.Sprintf("type %s takes a schemas.%s payload", t, want.Name())}
	}
	s := encoders.Get().(*encoderState)
	defer encoders.Put(s)
	s.buf.Reset()
	if err := s.enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", t, err)
	}
	return bytes.Clone(s.buf.Bytes()), nil
}

// DecodePayload decodes env's payload into a new value of its registered struct and
// returns a pointer to it.
func DecodePayload(env *Envelope) (any, error) {
	p, err := NewPayload(env.Type)
	if err != nil {
		return nil, err
	}
	if err := decodePayloadInto(env, p); err != nil {
		return nil, err
	}
	return p, nil
}

// PayloadAs decodes env's payload into a P, which must be the struct registered for
// env.Type.
func PayloadAs[P any](env *Envelope) (*P, error) {
	want, _ := PayloadType(env.Type)
	if reflect.TypeFor[P]() != want {
		return nil, &FieldError{Field: "type", Value: string(env.Type), Reason: fmt.Sprintf("payload is not a %s", reflect.TypeFor[P]().Name())}
	}
	p := new(P)
	if err := decodePayloadInto(env, p); err != nil {
		return nil, err
	}
	return p, nil
}

func decodePayloadInto(env *Envelope, p any) error {
	if len(env.Payload) == 0 {
		return &FieldError{Field: "payload", Reason: "missing"}
	}
	s := getDecoder(env.Payload)
	defer decoders.Put(s)
	if err := s.dec.Decode(p); err != nil {
		return &FieldError{Field: "payload", Value: string(env.Type), Reason: "does not decode as its registered struct: " + err.Error()}
	}
	return nil
}
