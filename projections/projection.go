package projections

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Projection names.
const (
	Sessions    = "sessions"
	DAGs        = "dags"
	Checkpoints = "checkpoints"
	Pending     = "pending"
	Log         = "log"
	Traces      = "trace"
	Calls       = "calls"
	History     = "history"
	Code        = "code"
	Skills      = "skills"
	Pipelines   = "pipelines"
	Vectors     = "vectors"
	Plans       = "plans"
	Consults    = "consults"
	Permits     = "permits"
	Schedules   = "schedules"
	Audit       = "audit"
	Docs        = "docs"
	Graph       = "graph"
)

// projection is one read model: a name, a version, the key prefix it owns, and
// its fold. apply returns an error only when storage fails; an event that
// breaks the projection's rules is recorded with tx.reject.
type projection struct {
	name    string
	version int
	apply   func(t *tx, ev *event) error
	// writesOnly: the fold only writes keys, straight into the batch, and
	// keeps no objects in the cache. Such a projection is up to date with
	// every batch, so its cursor advances while a catch-up holds the other
	// projections' changed objects back (see stateFlushEvents).
	writesOnly bool
}

// prefix is the key range the projection owns: "<name>/".
func (p *projection) prefix() []byte { return []byte(p.name + "/") }

// projectionList is every projection in the order events are applied. Bump a
// version when its fold or key layout changes: Open then rebuilds it.
var projectionList = []*projection{
	{name: Sessions, version: 2, apply: applySessions},
	{name: DAGs, version: 3, apply: applyDAGs},
	{name: Checkpoints, version: 1, apply: applyCheckpoints},
	{name: Pending, version: 1, apply: applyPending},
	{name: Log, version: 2, apply: applyLog, writesOnly: true},
	{name: Traces, version: 1, apply: applyTrace, writesOnly: true},
	{name: Calls, version: 2, apply: applyCalls},
	{name: History, version: 2, apply: applyHistory},
	{name: Code, version: 7, apply: applyCode},
	{name: Skills, version: 1, apply: applySkills},
	{name: Pipelines, version: 2, apply: applyPipelines},
	{name: Vectors, version: 1, apply: applyVectors},
	{name: Plans, version: 1, apply: applyPlans},
	{name: Consults, version: 2, apply: applyConsults},
	{name: Permits, version: 1, apply: applyPermits},
	{name: Schedules, version: 1, apply: applySchedules},
	{name: Audit, version: 7, apply: applyAudit},
	{name: Docs, version: 1, apply: applyDocs},
	{name: Graph, version: 2, apply: applyGraph},
}

// ProjectionNames lists the projections.
func ProjectionNames() []string {
	out := make([]string, len(projectionList))
	for i, p := range projectionList {
		out[i] = p.name
	}
	return out
}

func projectionByName(name string) *projection {
	for _, p := range projectionList {
		if p.name == name {
			return p
		}
	}
	return nil
}

// event is one stream event being applied, with its payload decoded once for
// all projections.
type event struct {
	seq     uint64
	subject string
	env     *schemas.Envelope // nil when the bytes are not an envelope
	// envelope holds a Raw read's decoded envelope: one allocation for both.
	envelope schemas.Envelope
	data     []byte
	id       string // the envelope id, or the Nats-Msg-Id of undecodable bytes
	err      error
	// pending is how many events followed this one in the stream when it was
	// read.
	pending uint64

	decoded bool
	payload any
	perr    error

	// fork is a session_fork's check and the parent's state to copy (see
	// prepareFork).
	fork *forkSeed

	// foreign marks, in a one-session fold (SessionAsOf), another session's
	// switch that the live fold accepted: only its effect on the session
	// switched away from applies.
	foreign bool
}

// eventPool recycles the events a fold is done with (see release): each
// embeds its decoded envelope, about 500 bytes, and a rebuild decodes one
// per message of the stream.
var eventPool = sync.Pool{New: func() any { return new(event) }}

// release hands e back for the reader to decode the next event into. A fold
// keeps nothing of an event once applied, and an observer keeps nothing of
// what it is handed (see Observe): what a projection keeps (the envelope's
// strings, the decoded payload, the message's bytes) was allocated by the
// decode or the read, not in the event, so only the event itself is reused.
func (e *event) release() {
	*e = event{}
	eventPool.Put(e)
}

func newEvent(ev *events.Event) *event {
	e := &event{seq: ev.Seq, subject: ev.Subject, env: ev.Env, data: ev.Data, err: ev.Err, pending: ev.Pending}
	switch {
	case ev.Env != nil:
		e.id = ev.Env.ID
	case ev.Header != nil:
		if v := ev.Header[events.HeaderMsgID]; len(v) > 0 {
			e.id = v[0]
		}
	}
	return e
}

// decodeEvent decodes a Raw read's event: the envelope and its payload in one
// pass, since validating the envelope decodes the payload anyway.
func decodeEvent(ev *events.Event) *event {
	if ev.Env != nil || ev.Err != nil {
		return newEvent(ev) // decoded already
	}
	e := eventPool.Get().(*event)
	*e = event{seq: ev.Seq, subject: ev.Subject, data: ev.Data, pending: ev.Pending}
	if e.payload, e.err = schemas.UnmarshalPayloadInto(ev.Data, &e.envelope); e.err == nil {
		e.env = &e.envelope
		e.id, e.decoded = e.env.ID, true
	} else if v := ev.Header[events.HeaderMsgID]; len(v) > 0 {
		e.id = v[0]
	}
	return e
}

// sessionOfSubject reads the session and type tokens of a SYLK subject,
// sylk.v1.<session>.<source>.<target>.<type>; empty when it is not one.
func sessionOfSubject(subject string) (string, schemas.Type) {
	toks := strings.Split(strings.TrimPrefix(subject, events.Prefix+"."), ".")
	if len(toks) != 4 || !strings.HasPrefix(subject, events.Prefix+".") || !schemas.ValidName(toks[0]) {
		return "", ""
	}
	return toks[0], schemas.Type(toks[3])
}

// decode returns the decoded payload (a pointer to the type's struct).
func (e *event) decode() (any, error) {
	if !e.decoded {
		e.decoded = true
		e.payload, e.perr = schemas.DecodePayload(e.env)
	}
	return e.payload, e.perr
}

// reject records that projection p refused e, and why.
func (t *tx) reject(p string, e *event, format string, args ...any) error {
	r := Rejection{Projection: p, Seq: e.seq, ID: e.id, Reason: fmt.Sprintf(format, args...)}
	if e.env != nil {
		r.Session, r.Type = e.env.SessionID, e.env.Type
	} else {
		// Bytes that do not decode (another schema version) still belong
		// to the session their subject names: replay reports them there.
		r.Session, r.Type = sessionOfSubject(e.subject)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.set(rejectionKey(p, e.seq), v)
}

// payloadOf decodes e's payload as a *P, recording a rejection by projection p
// when it does not decode (it was valid when appended, so this means a newer
// writer changed the payload incompatibly).
func payloadOf[P any](t *tx, p string, e *event) (*P, error) {
	v, err := e.decode()
	if err != nil {
		return nil, t.reject(p, e, "payload does not decode: %v", err)
	}
	out, ok := v.(*P)
	if !ok {
		return nil, t.reject(p, e, "payload is a %T", v)
	}
	return out, nil
}
