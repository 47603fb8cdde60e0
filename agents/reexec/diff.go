package reexec

import (
	"context"
	"fmt"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// SessionDiff is where two sessions' histories part: a fork and its parent,
// two runs of the same request.
type SessionDiff struct {
	A string `json:"a"`
	B string `json:"b"`
	// Same is how many events the histories share from the start (the same
	// event, or events equal as re-execution compares them, sessions aside).
	Same int `json:"same"`
	// Parted: the histories differ after Same events. AEvent and BEvent are
	// their first events from there (nil: that history ended); Fields the
	// differences when both have one.
	Parted bool    `json:"parted"`
	AEvent *Event  `json:"a_event,omitempty"`
	BEvent *Event  `json:"b_event,omitempty"`
	Fields []Field `json:"fields,omitempty"`
	// ARest and BRest count each history's events from the parting point.
	ARest int `json:"a_rest"`
	BRest int `json:"b_rest"`
}

// DiffSessions compares the histories of sessions a and b (through their
// lineages), event by event in order, skipping the fork events themselves.
func DiffSessions(ctx context.Context, r projections.Reader, a, b string) (*SessionDiff, error) {
	ha, err := history(ctx, r, a)
	if err != nil {
		return nil, err
	}
	hb, err := history(ctx, r, b)
	if err != nil {
		return nil, err
	}
	d := &SessionDiff{A: a, B: b}
	for d.Same < len(ha) && d.Same < len(hb) {
		x, y := ha[d.Same], hb[d.Same]
		if x.ID != y.ID {
			if f := Diff(x, y); len(f) > 0 {
				d.Fields = f
				break
			}
		}
		d.Same++
	}
	d.ARest, d.BRest = len(ha)-d.Same, len(hb)-d.Same
	if d.ARest > 0 || d.BRest > 0 {
		d.Parted = true
		if d.ARest > 0 {
			d.AEvent = ha[d.Same]
		}
		if d.BRest > 0 {
			d.BEvent = hb[d.Same]
		}
	}
	return d, nil
}

// history is a session's events as the diff compares them: normalized, the
// session left out, fork events skipped.
func history(ctx context.Context, r projections.Reader, session string) ([]*Event, error) {
	var out []*Event
	q := projections.LogQuery{Session: session}
	for {
		page, err := r.SessionLog(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			env, err := schemas.Unmarshal(e.Data)
			if err != nil {
				out = append(out, &Event{Seq: e.Seq, Payload: map[string]any{"(undecodable)": err.Error()}})
				continue
			}
			if env.Type == schemas.TypeSessionFork {
				continue
			}
			ev := Normalize(e.Seq, env)
			ev.Session = ""
			out = append(out, ev)
		}
		if !page.More {
			break
		}
		q.From = page.Next
	}
	if len(out) == 0 {
		if _, err := r.Session(ctx, session); err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownSession, session, err)
		}
	}
	return out, nil
}
