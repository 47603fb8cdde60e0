package projections

import (
	"slices"
	"time"

	"github.com/sylk/sylk/schemas"
)

// focus is the session the user last switched to.
type focus struct {
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
}

// globalPause is the state of pause/resume signals of scope "all".
type globalPause struct {
	Paused bool      `json:"paused"`
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
}

func timePtr(t time.Time) *time.Time { return &t }

// applySessions folds session events into the sessions projection. Rules:
// session_create of an existing id is refused; the moves follow the six legal
// transitions (see Next); session_switch{From} activates its session and
// suspends From if From is active; switch and resume move the focus to their
// session, and leaving the active state drops it; context updates need a created or active
// session (a suspended session's context is frozen). Events of other types only
// track the active DAG and pause signals.
func applySessions(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypeSessionCreate:
		return sessionCreate(t, ev)
	case schemas.TypeSessionFork:
		return forkSession(t, ev)
	case schemas.TypeSessionResume, schemas.TypeSessionSwitch, schemas.TypeSessionSuspend,
		schemas.TypeSessionComplete, schemas.TypeSessionFail:
		return sessionMove(t, ev)
	case schemas.TypeSessionContextSet:
		return sessionContext(t, ev)
	case schemas.TypeDAGExecute:
		p, err := payloadOf[schemas.DAGExecute](t, Sessions, ev)
		if p == nil {
			return err
		}
		if _, _, problems := Plan(p.DAG); len(problems) > 0 {
			return nil
		}
		return updateSession(t, env.SessionID, func(s *Session) bool {
			if slices.Contains(s.DAGHistory, p.DAG.ID) {
				return false // a duplicate the dags projection refuses
			}
			s.ActiveDAG = p.DAG.ID
			s.DAGHistory = append(s.DAGHistory, p.DAG.ID)
			s.UpdatedSeq = ev.seq
			return true
		})
	case schemas.TypeWorkflowComplete, schemas.TypeDAGRejected:
		var dag string
		if env.Type == schemas.TypeWorkflowComplete {
			p, err := payloadOf[schemas.WorkflowComplete](t, Sessions, ev)
			if p == nil {
				return err
			}
			dag = p.DAGID
		} else {
			p, err := payloadOf[schemas.DAGRejected](t, Sessions, ev)
			if p == nil {
				return err
			}
			dag = p.DAGID
		}
		return updateSession(t, env.SessionID, func(s *Session) bool {
			if s.ActiveDAG != dag {
				return false
			}
			s.ActiveDAG = ""
			s.UpdatedSeq = ev.seq
			return true
		})
	case schemas.TypeSignal:
		p, err := payloadOf[schemas.Signal](t, Sessions, ev)
		if p == nil {
			return err
		}
		if p.Action != schemas.SignalPause && p.Action != schemas.SignalResume {
			return nil
		}
		paused := p.Action == schemas.SignalPause
		if p.Scope == schemas.ScopeAll {
			store(t, globalPauseKey, &globalPause{Paused: paused, Seq: ev.seq, At: env.Timestamp})
			return nil
		}
		return updateSession(t, env.SessionID, func(s *Session) bool {
			if s.Paused == paused {
				return false
			}
			s.Paused, s.PausedBy = paused, ""
			if paused {
				s.PausedBy = env.Source
			}
			s.UpdatedSeq = ev.seq
			return true
		})
	}
	return nil
}

// updateSession applies fn to the session if it exists; fn reports whether it
// changed it.
func updateSession(t *tx, id string, fn func(*Session) bool) error {
	k := sessionKey(id)
	s, err := load[Session](t, k)
	if err != nil || s == nil {
		return err
	}
	if fn(s) {
		store(t, k, s)
	}
	return nil
}

func sessionCreate(t *tx, ev *event) error {
	env := ev.env
	if env.SessionID == schemas.SystemSession {
		return t.reject(Sessions, ev, "the system session %s has no lifecycle", schemas.SystemSession)
	}
	p, err := payloadOf[schemas.SessionCreate](t, Sessions, ev)
	if p == nil {
		return err
	}
	k := sessionKey(env.SessionID)
	s, err := load[Session](t, k)
	if err != nil {
		return err
	}
	if s != nil {
		return t.reject(Sessions, ev, "session %s already exists (created at seq %d, now %s)", s.ID, s.CreatedSeq, s.State)
	}
	ts := env.Timestamp
	s = &Session{
		ID: env.SessionID, Name: p.Name, State: StateCreated, CreatedAt: ts,
		BaseBranch: p.BaseBranch, Config: p.Config, Metadata: p.Metadata,
		Transitions: []Transition{{Seq: ev.seq, At: ts, To: StateCreated, Event: env.Type}},
		CreatedSeq:  ev.seq, UpdatedSeq: ev.seq, LastActiveAt: ts,
	}
	store(t, k, s)
	return nil
}

func sessionMove(t *tx, ev *event) error {
	env := ev.env
	if env.SessionID == schemas.SystemSession {
		return t.reject(Sessions, ev, "the system session %s has no lifecycle", schemas.SystemSession)
	}
	move, _ := MoveOf(env.Type)
	payload, err := ev.decode()
	if err != nil {
		return t.reject(Sessions, ev, "payload does not decode: %v", err)
	}
	k := sessionKey(env.SessionID)
	s, err := load[Session](t, k)
	if err != nil {
		return err
	}
	if s == nil && ev.foreign {
		// Another session's switch away from the one being folded alone: it
		// suspends it and takes the focus.
		if p, ok := payload.(*schemas.SessionSwitch); ok {
			store(t, focusKey, &focus{Session: env.SessionID, Seq: ev.seq})
			return suspendFrom(t, ev, p.From)
		}
		return nil
	}
	if s == nil {
		return t.reject(Sessions, ev, "session %s does not exist", env.SessionID)
	}
	to, err := Next(s.ID, s.State, move)
	if err != nil {
		return t.reject(Sessions, ev, "%v", err)
	}
	ts := env.Timestamp
	f, err := load[focus](t, focusKey)
	if err != nil {
		return err
	}
	focused := f != nil && f.Session == s.ID
	switch p := payload.(type) {
	case *schemas.SessionSwitch:
		if p.From != s.ID {
			if err := suspendFrom(t, ev, p.From); err != nil {
				return err
			}
		}
		store(t, focusKey, &focus{Session: s.ID, Seq: ev.seq})
	case *schemas.SessionResume:
		// The user returns to the session: it takes the focus.
		store(t, focusKey, &focus{Session: s.ID, Seq: ev.seq})
	case *schemas.SessionComplete:
		s.Summary = p.Summary
	case *schemas.SessionFail:
		s.FailReason = p.Reason
	}
	if to != s.State {
		s.Transitions = append(s.Transitions, Transition{Seq: ev.seq, At: ts, From: s.State, To: to, Event: env.Type})
		s.State = to
		switch to {
		case StateActive:
			s.ActivatedAt = timePtr(ts)
		case StateSuspended:
			s.SuspendedAt = timePtr(ts)
		case StateCompleted:
			s.CompletedAt = timePtr(ts)
		case StateFailed:
			s.FailedAt = timePtr(ts)
		}
	}
	if to != StateActive && focused {
		store[focus](t, focusKey, nil)
	}
	s.UpdatedSeq, s.LastActiveAt = ev.seq, ts
	store(t, k, s)
	return nil
}

func sessionContext(t *tx, ev *event) error {
	env := ev.env
	p, err := payloadOf[schemas.SessionContextSet](t, Sessions, ev)
	if p == nil {
		return err
	}
	k := sessionKey(env.SessionID)
	s, err := load[Session](t, k)
	if err != nil {
		return err
	}
	switch {
	case s == nil:
		return t.reject(Sessions, ev, "session %s does not exist", env.SessionID)
	case s.State == StateSuspended:
		return t.reject(Sessions, ev, "session %s is suspended: its context is frozen until it is resumed", s.ID)
	case s.State == StateCompleted || s.State == StateFailed:
		return t.reject(Sessions, ev, "session %s is %s: its context can no longer change", s.ID, s.State)
	}
	c := &s.Context
	setStr := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setList := func(dst *[]string, v []string) {
		if len(v) > 0 {
			*dst = v
		}
	}
	setStr(&c.CurrentTask, p.CurrentTask)
	setStr(&c.CurrentStep, p.CurrentStep)
	setStr(&c.CurrentObjective, p.CurrentObjective)
	setList(&c.CompletedSteps, p.CompletedSteps)
	setList(&c.NextSteps, p.NextSteps)
	setList(&c.Blockers, p.Blockers)
	setList(&c.ModifiedFiles, p.ModifiedFiles)
	setList(&c.ReadFiles, p.ReadFiles)
	setList(&c.CreatedFiles, p.CreatedFiles)
	setList(&c.UserWants, p.UserWants)
	setList(&c.UserRejects, p.UserRejects)
	c.UpdatedAt = timePtr(env.Timestamp)
	s.UpdatedSeq, s.LastActiveAt = ev.seq, env.Timestamp
	store(t, k, s)
	return nil
}

// suspendFrom suspends the session a switch leaves, if it is active.
func suspendFrom(t *tx, ev *event, from string) error {
	if from == "" {
		return nil
	}
	ts := ev.env.Timestamp
	return updateSession(t, from, func(s *Session) bool {
		if s.State != StateActive {
			return false
		}
		s.State, s.SuspendedAt = StateSuspended, timePtr(ts)
		s.Transitions = append(s.Transitions, Transition{Seq: ev.seq, At: ts, From: StateActive, To: StateSuspended, Event: ev.env.Type})
		s.UpdatedSeq, s.LastActiveAt = ev.seq, ts
		return true
	})
}
