package reexec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// keep appends the new run from its first divergence on to Options.Keep as
// a fork of the session re-executed (see WhatIf).
func (e *engine) keep(ctx context.Context) (*WhatIf, error) {
	if len(e.rec.Sessions) > projections.MaxForkDepth {
		return nil, fmt.Errorf("session %s is a fork of a fork: forks nest %d deep at most", e.rec.Session, projections.MaxForkDepth)
	}
	// The point: the last recorded event of the history before the
	// divergence, and its counterpart in the new run.
	var point *Recorded
	for _, r := range e.rec.Events {
		if float64(r.Seq) >= e.at {
			break
		}
		if r.Kind != Call && r.Env.SessionID != schemas.SystemSession {
			point = r
		}
	}
	if point == nil {
		return nil, errors.New("the run diverged at its first event: there is no history to fork")
	}
	id := point.Env.ID
	if n := e.pairOf[point]; n != nil {
		id = n.ID
	}
	from, ok := e.newSeq[id]
	if !ok {
		return nil, fmt.Errorf("the new run has no counterpart of seq %d, the point of the fork", point.Seq)
	}
	fork := e.opts.KeepAs
	if fork == "" {
		fork = schemas.NewID()
	}

	// The new run's events after it that are not the shared history: in the
	// session itself, or an ancestor's that the recording has after the
	// point.
	recorded := func(id string) *Recorded {
		if r := e.byID[id]; r != nil && r.Kind == Input {
			return r
		}
		return e.newToRec[id]
	}
	var picked []*schemas.Envelope
	ids := map[string]string{}
	for _, ev := range e.run {
		env := ev.Env
		r := recorded(env.ID)
		switch {
		case ev.Seq <= from || env.Type == schemas.TypeSessionFork:
		case r != nil && r.Seq <= point.Seq:
		case r == nil && env.SessionID != e.rec.Session:
		default:
			picked = append(picked, env)
			ids[env.ID] = schemas.DeriveID(env, "what_if/"+fork)
		}
	}
	// References to the new run's events become the fork's ids, or the
	// recorded ids of the shared history's.
	ref := func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		if r := recorded(id); r != nil {
			return r.Env.ID
		}
		return id
	}
	start, err := schemas.New(schemas.TypeSessionFork, fork, "user", "user", time.Now(), schemas.SessionFork{
		Parent: e.rec.Session, ParentSeq: point.Seq, Name: "what-if of " + e.rec.Session, Continued: true,
		Reason: fmt.Sprintf("re-execution of %s went live after seq %d", e.rec.Session, point.Seq),
	})
	if err != nil {
		return nil, err
	}
	out := []*schemas.Envelope{start}
	for _, env := range picked {
		cp := *env
		cp.ID, cp.ParentID, cp.CorrelationID, cp.SessionID = ids[env.ID], ref(env.ParentID), ref(env.CorrelationID), fork
		cp.Metadata = maps.Clone(env.Metadata)
		if cp.Metadata == nil {
			cp.Metadata = map[string]string{}
		}
		cp.Metadata[agents.MetaWhatIf] = e.rec.Session
		out = append(out, &cp)
	}
	for len(out) > 0 {
		n := min(len(out), events.MaxBatch)
		if _, err := e.opts.Keep.AppendBatch(ctx, out[:n]); err != nil {
			return nil, err
		}
		out = out[n:]
	}
	return &WhatIf{Session: fork, Parent: e.rec.Session, ParentSeq: point.Seq, Events: len(picked)}, nil
}
