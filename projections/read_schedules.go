package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sylk/sylk/schemas"
)

// Schedule is a schedule's definition and state.
type Schedule struct {
	schemas.ScheduleAdd
	// State is active, paused, disabled or removed.
	State string `json:"state"`
	// Created is when it was added: an interval counts from it.
	Created time.Time `json:"created"`
	Seq     uint64    `json:"seq"`
	// LastDue is the due time of the last firing; Fired counts them.
	LastDue time.Time `json:"last_due,omitzero"`
	Fired   int       `json:"fired,omitempty"`
	// Failures counts consecutive failed runs; LastFailure is when the last
	// one ended, Reason why (or why it was disabled).
	Failures    int       `json:"failures,omitempty"`
	LastFailure time.Time `json:"last_failure,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	// Runs are the newest firings.
	Runs []ScheduleRun `json:"runs,omitempty"`
}

func (s *Schedule) fail(at time.Time, reason string) {
	s.Failures++
	s.LastFailure, s.Reason = at, reason
}

// ScheduleRun is one firing: its session and outcome (running, refused, or
// the workflow's outcome).
type ScheduleRun struct {
	Due     time.Time `json:"due"`
	Session string    `json:"session,omitempty"`
	DAG     string    `json:"dag,omitempty"`
	Missed  int       `json:"missed,omitempty"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason,omitempty"`
	Seq     uint64    `json:"seq"`
}

// scheduleRunRef indexes a run's session to its schedule.
type scheduleRunRef struct {
	Name string    `json:"name"`
	Due  time.Time `json:"due"`
}

// Schedule returns the named schedule (a removed one too); ErrNotFound if
// it was never added.
func (s *Store) Schedule(ctx context.Context, name string) (*Schedule, error) {
	v, err := s.get(scheduleKey(name))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("schedule", name)
	}
	out := &Schedule{}
	if err := json.Unmarshal(v, out); err != nil {
		return nil, fmt.Errorf("decode schedule %s: %w", name, err)
	}
	return out, nil
}

// Schedules lists the schedules by name, removed ones included.
func (s *Store) Schedules(ctx context.Context) ([]*Schedule, error) {
	out := []*Schedule{}
	err := scanPrefix(s.db, []byte("schedules/s/"), func(k, v []byte) error {
		sc := &Schedule{}
		if err := json.Unmarshal(v, sc); err != nil {
			return fmt.Errorf("decode schedule at %q: %w", k, err)
		}
		out = append(out, sc)
		return nil
	})
	return out, err
}
