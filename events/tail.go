package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/schemas"
)

// Event is one message of the SYLK stream as a reader sees it. Env is nil when
// the bytes are not a valid envelope; Err then says why. Such bytes, published
// by an outside client, are shown, never fatal. A Raw read leaves both nil:
// the reader decodes Data itself.
type Event struct {
	Seq     uint64
	Subject string
	Time    time.Time // when the stream stored it
	Env     *schemas.Envelope
	Data    []byte
	Header  map[string][]string
	Err     error
	// Pending is how many events matching the reader's filter follow this one in
	// the stream right now: progress for a reader, zero at the end.
	Pending uint64
}

// AppendLine appends ev as `sylk tail --json` prints it to b: {"seq",
// "subject", then "envelope" (its payload decoded) or "invalid" (why the
// bytes are not one)}, the bytes json.Marshal gives for that shape, without
// its reflection. payload is the envelope's payload already decoded, or nil
// to decode it here.
func (ev *Event) AppendLine(b []byte, payload any) ([]byte, error) {
	return ev.appendLine(b, payload, false)
}

// AppendBrief appends what the web view streams of ev to a page: the line
// AppendLine writes with the envelope's brief (schemas.Envelope.AppendBriefJSON)
// and no "subject", which the brief's fields give; bytes that are no
// envelope keep their subject beside "invalid".
func (ev *Event) AppendBrief(b []byte, payload any) ([]byte, error) {
	return ev.appendLine(b, payload, true)
}

func (ev *Event) appendLine(b []byte, payload any, brief bool) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	if !brief || ev.Env == nil {
		b = append(b, `,"subject":`...)
		b = schemas.AppendJSONString(b, ev.Subject)
	}
	switch {
	case ev.Env != nil:
		var err error
		b = append(b, `,"envelope":`...)
		if brief {
			b, err = ev.Env.AppendBriefJSON(b, payload)
		} else {
			b, err = ev.Env.AppendJSON(b, payload)
		}
		if err != nil {
			return nil, err
		}
	case ev.Err != nil && ev.Err.Error() != "":
		b = append(b, `,"invalid":`...)
		b = schemas.AppendJSONString(b, ev.Err.Error())
	}
	return append(b, '}'), nil
}

// Cursor says where reading starts. The zero Cursor reads everything.
type Cursor struct {
	// Seq starts at this stream sequence (inclusive).
	Seq uint64
	// Time starts at the first event stored at or after it.
	Time time.Time
	// New starts after the last event: only events appended from now on.
	New bool
}

// ParseCursor reads a cursor: "all", "new", a stream sequence, an RFC 3339 time,
// or a duration meaning that long ago ("10m").
func ParseCursor(s string, now time.Time) (Cursor, error) {
	switch s {
	case "", "all":
		return Cursor{}, nil
	case "new":
		return Cursor{New: true}, nil
	}
	if seq, err := strconv.ParseUint(s, 10, 64); err == nil {
		return Cursor{Seq: seq}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Cursor{Time: t}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return Cursor{Time: now.Add(-d)}, nil
	}
	return Cursor{}, fmt.Errorf("--since %q: want all, new, a sequence number (42), an RFC 3339 time (2026-11-21T09:00:00Z) or a duration ago (10m)", s)
}

// start is where a consumer reading from the cursor begins: its deliver
// policy, with the start sequence or time that policy takes.
func (c Cursor) start() (policy jetstream.DeliverPolicy, seq uint64, at *time.Time) {
	switch {
	case c.New:
		return jetstream.DeliverNewPolicy, 0, nil
	case c.Seq > 0:
		return jetstream.DeliverByStartSequencePolicy, c.Seq, nil
	case !c.Time.IsZero():
		t := c.Time
		return jetstream.DeliverByStartTimePolicy, 0, &t
	}
	return jetstream.DeliverAllPolicy, 0, nil
}

// ReadOption changes how Tail, Scan and Read hand over events.
type ReadOption func(*readOptions)

type readOptions struct {
	raw, bodies bool
}

func readOptionsOf(opts []ReadOption) readOptions {
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Raw hands over events undecoded: Seq, Subject, Time, Data, Header and
// Pending, with Env and Err nil. By default every event's envelope is decoded
// and validated, which decodes its payload too; a reader that decodes the
// bytes itself, and keeps the payload (the projector, with
// schemas.UnmarshalPayloadInto), does that work once instead of twice.
func Raw() ReadOption { return func(o *readOptions) { o.raw = true } }

// Tail is a live, ordered read of the stream. After a disconnect (a server
// restart included) it resumes after the last event it returned: no gap, no
// duplicate.
type Tail struct {
	log     *Log
	subject string
	from    Cursor
	msgs    jetstream.MessagesContext
	last    uint64
	raw     bool
}

// Tail follows events matching subject (a filter such as Filter.Subject gives)
// from the cursor on.
func (l *Log) Tail(ctx context.Context, subject string, from Cursor, opts ...ReadOption) (*Tail, error) {
	t := &Tail{log: l, subject: subject, from: from, raw: readOptionsOf(opts).raw}
	if err := t.open(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// open starts the tail's ordered consumer where the tail resumes.
func (t *Tail) open(ctx context.Context) error {
	from := t.from
	if t.last > 0 {
		from = t.Cursor()
	}
	// An ordered consumer replaces its server-side consumer, under the same
	// name and the next serial, when it loses it (its server died); a
	// cluster that failed over can refuse that name for good, so after a few
	// attempts the tail starts a consumer of a new name instead (open).
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{t.subject}, MaxResetAttempts: tailResetAttempts}
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = from.start()
	cons, err := t.log.js.OrderedConsumer(ctx, broker.Stream, cfg)
	if err != nil {
		return fmt.Errorf("tail %s: %w", t.subject, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("tail %s: %w", t.subject, err)
	}
	t.msgs = msgs
	return nil
}

// tailResetAttempts bounds an ordered consumer's own attempts to replace its
// lost server-side consumer (1 s, 2 s, 4 s apart).
const tailResetAttempts = 3

// Next blocks until the next event, or ctx ends.
func (t *Tail) Next(ctx context.Context) (*Event, error) {
	for {
		m, err := t.msgs.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil, err
		}
		if err != nil {
			// The ordered consumer gave up replacing its consumer: a new
			// one goes on after the last event returned.
			t.msgs.Stop()
			if err := t.reopen(ctx); err != nil {
				return nil, err
			}
			continue
		}
		ev, err := eventOf(m, t.raw)
		if err != nil {
			return nil, err
		}
		t.last = ev.Seq
		return ev, nil
	}
}

// reopen opens the tail again until it succeeds or ctx ends, a second
// apart.
func (t *Tail) reopen(ctx context.Context) error {
	for {
		err := t.open(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Cursor is where a new Tail would resume: after the last event returned.
func (t *Tail) Cursor() Cursor { return Cursor{Seq: t.last + 1} }

// Stop ends the tail.
func (t *Tail) Stop() { t.msgs.Stop() }

func eventOf(m jetstream.Msg, raw bool) (*Event, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("event metadata: %w", err)
	}
	ev := &Event{Seq: md.Sequence.Stream, Subject: m.Subject(), Time: md.Timestamp, Data: m.Data(), Header: m.Headers(), Pending: md.NumPending}
	if !raw {
		ev.Env, ev.Err = schemas.Unmarshal(ev.Data)
	}
	return ev, nil
}

// Read returns the events matching subject with stream sequence in [from, to]
// (to = 0: up to the last event now in the stream), in order, then stops.
func (l *Log) Read(ctx context.Context, subject string, from Cursor, to uint64, opts ...ReadOption) ([]*Event, error) {
	var out []*Event
	err := l.Scan(ctx, subject, from, to, func(ev *Event) error {
		out = append(out, ev)
		return nil
	}, opts...)
	return out, err
}

// IsStreamSubject reports whether s is a subject of the SYLK stream.
func IsStreamSubject(s string) bool { return strings.HasPrefix(s, Prefix+".") }

// ErrNotFound means no event has that sequence.
var ErrNotFound = errors.New("no such event")

// Get returns the event at stream sequence seq with a direct get: one message
// block read, no consumer.
func (l *Log) Get(ctx context.Context, seq uint64) (*Event, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, getAttempt)
		ev, err := l.get(actx, seq)
		cancel()
		// A request sent while a cluster elects a new leader (a member just
		// stopped) is never answered: it is asked again, until ctx ends.
		if err == nil || !broker.Unanswered(ctx, err) {
			return ev, err
		}
	}
}

// getAttempt bounds one attempt of Get, and one consumer creation of a
// scan. (A variable for tests.)
var getAttempt = 5 * time.Second

func (l *Log) get(ctx context.Context, seq uint64) (*Event, error) {
	s, err := l.js.Stream(ctx, broker.Stream)
	if err != nil {
		return nil, err
	}
	m, err := broker.GetMsg(ctx, l.js, s, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: seq %d", ErrNotFound, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("get seq %d: %w", seq, err)
	}
	ev := &Event{Seq: m.Sequence, Subject: m.Subject, Time: m.Time, Data: m.Data, Header: m.Header}
	ev.Env, ev.Err = schemas.Unmarshal(m.Data)
	return ev, nil
}

// LastSeq is the sequence of the last event in the stream (0 when empty).
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	// Stream asks for the stream's info (one request): asking again with
	// Info would double the cost of a call made at every Orchestrator step.
	s, err := l.js.Stream(ctx, broker.Stream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq, nil
}
