package schemas

import (
	"crypto/sha256"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// Version is the envelope schema version this build writes. Readers accept any
// version and keep the fields they do not know.
const Version = 1

// SystemSession is the session id of events that belong to no user session
// (circuit breaker changes, global signals, dead letters of unreadable bytes).
const SystemSession = "_"

// Status is where a message is in its life. The seed names the field but not its
// values (seed-002-a E1); these are ours.
type Status string

// Message statuses.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
)

// Priority orders work; higher runs first. The values are the LLM gate's lanes of
// seed L3926-3998, reused for every message.
type Priority int

// Priorities.
const (
	PriorityBackground      Priority = 20
	PriorityValidation      Priority = 40
	PriorityExecution       Priority = 60
	PriorityPlanning        Priority = 80
	PriorityUserInteractive Priority = 100
)

// Envelope is one event: every field of the seed's Message (seed L82-137) plus the
// schema version. Payload holds the msgpack encoding of the payload struct
// registered for Type; use [Envelope.SetPayload] and [DecodePayload] to work with it.
type Envelope struct {
	Schema        int                `json:"schema"`
	ID            string             `json:"id"`
	CorrelationID string             `json:"correlation_id,omitempty"`
	ParentID      string             `json:"parent_id,omitempty"`
	SessionID     string             `json:"session_id"`
	Source        string             `json:"source"`
	Target        string             `json:"target,omitempty"`
	Type          Type               `json:"type"`
	Payload       msgpack.RawMessage `json:"payload"`
	Timestamp     time.Time          `json:"timestamp"`
	Deadline      *time.Time         `json:"deadline,omitempty"`
	TTL           time.Duration      `json:"ttl,omitempty"`
	Status        Status             `json:"status,omitempty"`
	Attempt       int                `json:"attempt"`
	MaxAttempts   int                `json:"max_attempts,omitempty"`
	Priority      Priority           `json:"priority"`
	Metadata      map[string]string  `json:"metadata,omitempty"`
	Error         string             `json:"error,omitempty"`
	ProcessedAt   *time.Time         `json:"processed_at,omitempty"`

	StructuredIntent *StructuredIntent `json:"structured_intent,omitempty"`
	ConfidenceChain  []ConfidenceEntry `json:"confidence_chain,omitempty"`
	RerouteHistory   []RerouteHop      `json:"reroute_history,omitempty"`

	// Unknown holds envelope keys written by a newer schema version, raw, so
	// re-encoding an envelope never drops them.
	Unknown map[string]msgpack.RawMessage `json:"-"`

	// checked is the payload slice last proven to decode as its registered struct
	// (encoded from it, or validated). Validate skips the payload decode while
	// Payload is still that very slice, which halves the cost of an append.
	checked msgpack.RawMessage
}

// StructuredIntent is the original request in structured form, extracted once by
// the Guide and carried unchanged for the request's whole life (seed L117-122).
type StructuredIntent struct {
	OriginalRequest string   `json:"original_request" msgpack:"original_request"`
	KeyConstraints  []string `json:"key_constraints,omitempty" msgpack:"key_constraints,omitempty"`
	SuccessCriteria []string `json:"success_criteria,omitempty" msgpack:"success_criteria,omitempty"`
	IntentType      string   `json:"intent_type,omitempty" msgpack:"intent_type,omitempty"`
}

// ConfidenceEntry is one agent's confidence after handling a message (seed L126-130).
type ConfidenceEntry struct {
	Agent      string  `json:"agent" msgpack:"agent"`
	Confidence float64 `json:"confidence" msgpack:"confidence"`
	Reason     string  `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// RerouteHop records one reroute: an agent rejected the request as outside its
// domain (seed L133-137).
type RerouteHop struct {
	From   string `json:"from" msgpack:"from"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
	To     string `json:"to" msgpack:"to"`
}

// NewID returns a fresh time-ordered envelope id (UUIDv7).
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// New builds an envelope of type t carrying payload, with a fresh id, the current
// schema version and the given timestamp. It fails if payload is not the struct
// registered for t.
func New(t Type, session, source, target string, ts time.Time, payload any) (*Envelope, error) {
	env := &Envelope{
		Schema:    Version,
		ID:        NewID(),
		SessionID: session,
		Source:    source,
		Target:    target,
		Type:      t,
		Timestamp: ts.UTC(),
		Priority:  PriorityExecution,
		Status:    StatusPending,
	}
	if err := env.SetPayload(payload); err != nil {
		return nil, err
	}
	env.CorrelationID = env.ID
	return env, nil
}

// NewUserEvent builds an event the user sends (source user, unaddressed, at
// the user-interactive priority), in reply to parent when it is not nil: its
// parent_id and correlation id then tie it to what it answers.
func NewUserEvent(t Type, session string, ts time.Time, payload any, parent *Envelope) (*Envelope, error) {
	env, err := New(t, session, "user", "", ts, payload)
	if err != nil {
		return nil, err
	}
	env.Priority = PriorityUserInteractive
	if parent != nil {
		env.ParentID = parent.ID
		env.CorrelationID = parent.CorrelationID
		if env.CorrelationID == "" {
			env.CorrelationID = parent.ID
		}
	}
	return env, nil
}

// Derive builds an event caused by e: a new id, parent_id = e.ID, the same
// correlation id, session, intent, confidence chain and reroute history. The chain
// and history are copied so the child can append without touching the parent.
func (e *Envelope) Derive(t Type, source, target string, ts time.Time, payload any) (*Envelope, error) {
	child, err := New(t, e.SessionID, source, target, ts, payload)
	if err != nil {
		return nil, err
	}
	child.ParentID = e.ID
	child.CorrelationID = e.CorrelationID
	if child.CorrelationID == "" {
		child.CorrelationID = e.ID
	}
	child.Priority = e.Priority
	child.StructuredIntent = e.StructuredIntent
	child.ConfidenceChain = append([]ConfidenceEntry(nil), e.ConfidenceChain...)
	child.RerouteHistory = append([]RerouteHop(nil), e.RerouteHistory...)
	return child, nil
}

// SetPayload encodes p as the envelope's payload. p must be the struct (or a pointer
// to the struct) registered for e.Type.
func (e *Envelope) SetPayload(p any) error {
	b, err := EncodePayload(e.Type, p)
	if err != nil {
		return err
	}
	e.Payload, e.checked = b, b
	return nil
}

// DeriveID returns a deterministic id for an event derived from the input event
// parent: the same (parent, key) always gives the same id, so an agent that
// handles a redelivered message appends events the stream recognises as
// duplicates instead of new ones. The id is UUID-shaped (version 8): a
// millisecond time, so derived ids sort near their cause, then bits of
// SHA-256(parent id, key). The time is the one the parent's id starts with
// when it is a UUID (every id of a causal tree then starts with its root's
// time), else the parent's timestamp: an id must not depend on when an agent
// handled a message, or a re-execution of the same inputs would derive other
// ids, and other tool and LLM call ids, than the recording.
func DeriveID(parent *Envelope, key string) string {
	h := sha256.Sum256([]byte(parent.ID + "\x00" + key))
	var u uuid.UUID
	if p, err := uuid.Parse(parent.ID); err == nil && len(parent.ID) == 36 {
		copy(u[:6], p[:6])
	} else {
		ms := uint64(parent.Timestamp.UnixMilli())
		for i := range 6 {
			u[i] = byte(ms >> (40 - 8*i))
		}
	}
	copy(u[6:], h[:10])
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}
