package schemas

import (
	"errors"
	"fmt"
)

// Errors returned by the codec and validation. Each is wrapped with the field and
// value at fault; check with errors.Is.
var (
	// ErrInvalid: the envelope breaks a rule of the contract.
	ErrInvalid = errors.New("invalid envelope")
	// ErrDecode: the bytes are not a msgpack envelope.
	ErrDecode = errors.New("undecodable envelope")
	// ErrUnknownType: the type is not in the catalogue.
	ErrUnknownType = errors.New("unknown message type")
)

// FieldError names the field and value that broke a rule. It matches ErrInvalid.
type FieldError struct {
	Field  string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("invalid envelope: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("invalid envelope: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is makes a FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

const maxNameLen = 64

// ValidName reports whether s is a legal id or name: [A-Za-z0-9_-]{1,64}. Such
// names are safe as NATS subject tokens.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameChars[s[i]] {
			return false
		}
	}
	return true
}

// nameChars marks the bytes a name may hold. Every envelope checks five or so
// names; a table lookup is half the cost of the comparisons.
var nameChars = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	return t
}()

// CheckName returns a FieldError if value is not a legal name for field.
func CheckName(field, value string) error {
	if ValidName(value) {
		return nil
	}
	reason := "must be 1-64 characters of A-Z a-z 0-9 _ -"
	if value == "" {
		reason = "is required"
	}
	return &FieldError{Field: field, Value: value, Reason: reason}
}

// Validate checks env against the contract: names, type, confidence, session,
// timestamp and payload. It returns the first violation as a *FieldError.
func Validate(env *Envelope) error {
	if env == nil {
		return &FieldError{Field: "envelope", Reason: "is nil"}
	}
	if err := CheckName("id", env.ID); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, value string }{
		{"correlation_id", env.CorrelationID}, {"parent_id", env.ParentID}, {"target", env.Target},
	} {
		if f.value != "" {
			if err := CheckName(f.name, f.value); err != nil {
				return err
			}
		}
	}
	if err := CheckName("source", env.Source); err != nil {
		return err
	}
	if env.SessionID != SystemSession {
		if err := CheckName("session_id", env.SessionID); err != nil {
			return err
		}
	}
	if !env.Type.Known() {
		return &FieldError{Field: "type", Value: string(env.Type), Reason: "not in the message catalogue (see `sylk schema`)"}
	}
	if env.Timestamp.IsZero() {
		return &FieldError{Field: "timestamp", Reason: "is required"}
	}
	if env.Attempt < 0 {
		return &FieldError{Field: "attempt", Value: fmt.Sprint(env.Attempt), Reason: "must not be negative"}
	}
	for i, c := range env.ConfidenceChain {
		if !(c.Confidence >= 0 && c.Confidence <= 1) {
			return &FieldError{Field: fmt.Sprintf("confidence_chain[%d].confidence", i), Value: fmt.Sprint(c.Confidence), Reason: "must be in [0,1]"}
		}
		if err := CheckName(fmt.Sprintf("confidence_chain[%d].agent", i), c.Agent); err != nil {
			return err
		}
	}
	if sameSlice(env.Payload, env.checked) {
		return nil
	}
	p, err := NewPayload(env.Type)
	if err != nil {
		return err
	}
	if err := decodePayloadInto(env, p); err != nil {
		return err
	}
	env.checked = env.Payload
	return nil
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}
