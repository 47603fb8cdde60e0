package projections

import (
	"context"
	"slices"

	"github.com/sylk/sylk/events"
)

// observer is one Observe call's function and the last event it saw.
type observer struct {
	fn   func(ev *events.Event, payload any)
	seen uint64
}

// Observe hands fn each event after start that the store's projector reads
// from the stream, in stream order and once each, before the event is
// folded: the projector's reader decodes an event once, for the fold and for
// fn. start is from, or the last event the projector had read when Observe
// was called if that is later (a caller reads what came before start from
// the stream itself). ev has Seq, Subject and Pending, and Env (or Err, for
// bytes that are no envelope); payload is the decoded payload, or nil when
// the reader did not decode it (Envelope.AppendJSON and
// schemas.DecodePayload then do). An event the projector reads again (after
// a stream error, or in a rebuild) is not handed again.
//
// fn runs on the projector's reader, which reads on only once it returns: it
// must be quick and must not block. It must not change ev or payload, nor
// keep them: the fold owns them once fn returns. The events come as the
// projector reads them: none while it is stopped and, while it catches up,
// as fast as it does. stop removes fn: once stop returns, fn is not called
// again.
//
// A process that runs the projector follows the stream through it instead
// of with a reader of its own: the stream is read and decoded once.
func (s *Store) Observe(from uint64, fn func(ev *events.Event, payload any)) (start uint64, stop func()) {
	s.observeMu.Lock()
	defer s.observeMu.Unlock()
	o := &observer{fn: fn, seen: max(from, s.observedTo)}
	s.observers = append(s.observers, o)
	return o.seen, func() {
		s.observeMu.Lock()
		defer s.observeMu.Unlock()
		s.observers = slices.DeleteFunc(s.observers, func(x *observer) bool { return x == o })
	}
}

// Received is the last stream sequence the projector's reader has taken
// from the stream, folded or on its way to the fold (during a rebuild, as
// far as the rebuild has read: a reader that needs an event waits for its
// sequence, not for this alone). Waiting for it (WaitFor) asks the server
// nothing: it waits for the events this process holds already, so what is
// read then is as fresh as the stream was a moment ago, and the batch the
// fold holds is committed at once.
func (s *Store) Received() uint64 {
	s.observeMu.Lock()
	defer s.observeMu.Unlock()
	return s.observedTo
}

// observe hands the reader's event e (read as ev) to each observer that has
// not seen it. An event read in bulk has no subject: it is read again for
// it, only when an observer wants the event (the few appended between an
// observer's start and the end of the catch-up that reads them).
func (p *Projector) observe(ctx context.Context, ev *events.Event, e *event) error {
	s := p.s
	s.observeMu.Lock()
	defer s.observeMu.Unlock()
	s.observedTo = e.seq
	subject := e.subject
	for _, o := range s.observers {
		if e.seq <= o.seen {
			continue
		}
		if subject == "" {
			full, err := p.src.Get(ctx, e.seq)
			if err != nil {
				return err
			}
			subject = full.Subject
		}
		ev.Subject, ev.Env, ev.Err = subject, e.env, e.err
		o.seen = e.seq
		o.fn(ev, e.payload)
	}
	return nil
}
