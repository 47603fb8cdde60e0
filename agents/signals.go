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
type signalState struct {
	mu           sync.RWMutex
	pausedAll    bool
	paused       map[string]bool
	cancelAllSeq uint64
	cancelSeq    map[string]uint64
}

func newSignalState() *signalState {
	return &signalState{paused: map[string]bool{}, cancelSeq: map[string]uint64{}}
}

func (s *signalState) apply(e signalEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := e.Scope == schemas.ScopeAll
	switch e.Action {
	case schemas.SignalPause:
		if all {
			s.pausedAll = true
		} else {
			s.paused[e.Session] = true
		}
	case schemas.SignalResume:
		if all {
			s.pausedAll = false
			clear(s.paused)
		} else {
			delete(s.paused, e.Session)
		}
	case schemas.SignalCancel:
		if all {
			s.cancelAllSeq = e.Seq
		} else {
			s.cancelSeq[e.Session] = e.Seq
		}
	}
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
	return s.pausedAll || s.paused[session]
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
			if e, ok := signalOf(ev); ok {
				s.apply(e)
				onSignal(e)
			}
		}
	}()
	return nil
}

func signalOf(ev *events.Event) (signalEvent, bool) {
	if ev.Env == nil {
		return signalEvent{}, false
	}
	p, err := schemas.PayloadAs[schemas.Signal](ev.Env)
	if err != nil {
		return signalEvent{}, false
	}
	return signalEvent{Seq: ev.Seq, Session: ev.Env.SessionID, Action: p.Action, Scope: p.Scope}, true
}
