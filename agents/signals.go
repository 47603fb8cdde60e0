package agents

import (
	"context"
	"fmt"
	"sync"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// signalEvent is a pause, resume or cancel as the runner applies it.
type signalEvent struct {
	Seq     uint64
	Session string
	Action  string
	Scope   string
}

// signalState is every signal so far, folded: which sessions are paused, and up
// to which stream sequence each session's (or everyone's) work is cancelled.
// Cancel covers what was appended before it; new work after a cancel runs.
//
// Signals reach it by two paths: the signal tail (every signal) and, for the
// agent they are addressed to, the runner's own consumer, in stream order with
// the work they govern, so a pause appended before a request holds it even
// when the tail lags. Either path may bring a signal after a newer one, so
// each pause or resume is kept with its sequence and an older one is ignored.
type signalState struct {
	mu sync.RWMutex
	// all is the last pause or resume of everything.
	all signalMark
	// sessions holds each session's last pause or resume newer than all.
	sessions     map[string]signalMark
	cancelAllSeq uint64
	cancelSeq    map[string]uint64
}

// signalMark is a pause or resume, at its stream sequence.
type signalMark struct {
	seq    uint64
	paused bool
}

func newSignalState() *signalState {
	return &signalState{sessions: map[string]signalMark{}, cancelSeq: map[string]uint64{}}
}

// apply folds e in and reports whether it was news: false for a signal
// already applied or older than the state it would change.
func (s *signalState) apply(e signalEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := e.Scope == schemas.ScopeAll
	switch e.Action {
	case schemas.SignalPause, schemas.SignalResume:
		mark := signalMark{seq: e.Seq, paused: e.Action == schemas.SignalPause}
		if e.Seq <= s.all.seq {
			return false
		}
		if all {
			s.all = mark
			// A resume of everything resumes every session too.
			if !mark.paused {
				clear(s.sessions)
			}
			return true
		}
		if e.Seq <= s.sessions[e.Session].seq {
			return false
		}
		s.sessions[e.Session] = mark
	case schemas.SignalCancel:
		if all {
			if e.Seq <= s.cancelAllSeq {
				return false
			}
			s.cancelAllSeq = e.Seq
			return true
		}
		if e.Seq <= s.cancelSeq[e.Session] {
			return false
		}
		s.cancelSeq[e.Session] = e.Seq
	default:
		return false
	}
	return true
}

// holds reports whether j must wait: its session is paused. Signals themselves
// and undecodable messages are never held.
func (s *signalState) holds(j *job) bool {
	if j.env == nil || j.env.Type == schemas.TypeSignal {
		return false
	}
	return s.isPaused(j.session)
}

func (s *signalState) isPaused(session string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.all.paused || s.sessions[session].paused
}

// cancelled reports whether the message at seq of session was cancelled.
func (s *signalState) cancelled(session string, seq uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return seq <= s.cancelAllSeq || seq <= s.cancelSeq[session]
}

// follow reads every signal so far, then follows new ones in the background,
// calling onSignal after applying each live one.
func (s *signalState) follow(ctx context.Context, log *events.Log, onSignal func(signalEvent)) error {
	subject := events.Filter{Type: schemas.TypeSignal}.Subject()
	var last uint64
	err := log.Scan(ctx, subject, events.Cursor{}, 0, func(ev *events.Event) error {
		if e, ok := signalOf(ev); ok {
			s.apply(e)
		}
		last = ev.Seq
		return nil
	})
	if err != nil {
		return fmt.Errorf("read signals: %w", err)
	}
	tail, err := log.Tail(ctx, subject, events.Cursor{Seq: last + 1})
	if err != nil {
		return fmt.Errorf("follow signals: %w", err)
	}
	go func() {
		defer tail.Stop()
		for {
			ev, err := tail.Next(ctx)
			if err != nil {
				return
			}
			if e, ok := signalOf(ev); ok && s.apply(e) {
				onSignal(e)
			}
		}
	}()
	return nil
}

func signalOf(ev *events.Event) (signalEvent, bool) {
	return envSignal(ev.Env, ev.Seq)
}

// envSignal is env, at stream sequence seq, as a signal; false if it is not one.
func envSignal(env *schemas.Envelope, seq uint64) (signalEvent, bool) {
	if env == nil || env.Type != schemas.TypeSignal {
		return signalEvent{}, false
	}
	p, err := schemas.PayloadAs[schemas.Signal](env)
	if err != nil {
		return signalEvent{}, false
	}
	return signalEvent{Seq: seq, Session: env.SessionID, Action: p.Action, Scope: p.Scope}, true
}
