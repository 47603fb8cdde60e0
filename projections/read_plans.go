package projections

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sylk/sylk/schemas"
)

// PlanMode is a session's plan mode: its state, the versions of the plan
// the Architect put to the user, and the approved plan's steps and todos as
// its DAG runs.
type PlanMode struct {
	Session string `json:"session"`
	// State is one of the schemas.Plan* states.
	State string `json:"state"`
	// PlanID is the current version's plan (and, once approved, its DAG).
	PlanID  string `json:"plan_id,omitempty"`
	Version int    `json:"version,omitempty"`
	DAGID   string `json:"dag_id,omitempty"`
	// Versions are every plan put to the user since plan mode was entered,
	// oldest first.
	Versions []PlanVersion `json:"versions,omitempty"`
	// Steps and Todos are the current version's statuses (schemas.Step*),
	// one per step and todo.
	Steps []string `json:"steps,omitempty"`
	Todos []string `json:"todos,omitempty"`
	// FailedStep is the first step that failed (1-based; 0: none).
	FailedStep    int    `json:"failed_step,omitempty"`
	FailureReason string `json:"failure_reason,omitempty"`
	// Held are messages typed while the plan awaited approval, not yet
	// released by the Guide.
	Held        []HeldInput      `json:"held,omitempty"`
	Transitions []PlanTransition `json:"transitions,omitempty"`
	Seq         uint64           `json:"seq"`
}

// Current is the version the state is about, or nil before the first.
func (p *PlanMode) Current() *PlanVersion {
	if len(p.Versions) == 0 {
		return nil
	}
	return &p.Versions[len(p.Versions)-1]
}

// PlanVersion is one plan put to the user, and what they answered.
type PlanVersion struct {
	Version   int              `json:"version"`
	PlanID    string           `json:"plan_id"`
	Seq       uint64           `json:"seq"`
	At        time.Time        `json:"at"`
	Plan      schemas.ModePlan `json:"plan"`
	Rationale string           `json:"rationale,omitempty"`
	// Outcome is approved, modified or rejected once answered.
	Outcome   string `json:"outcome,omitempty"`
	Feedback  string `json:"feedback,omitempty"`
	AnswerSeq uint64 `json:"answer_seq,omitempty"`
}

// HeldInput is a user message held while a plan awaits approval.
type HeldInput struct {
	ID   string `json:"id"`
	Seq  uint64 `json:"seq"`
	Text string `json:"text"`
}

// PlanTransition is one change of plan-mode state.
type PlanTransition struct {
	Seq   uint64       `json:"seq"`
	From  string       `json:"from"`
	To    string       `json:"to"`
	Event schemas.Type `json:"event"`
}

// PlanMode returns a session's plan mode; a session that never entered it is
// ErrNotFound.
func (s *Store) PlanMode(_ context.Context, session string) (*PlanMode, error) {
	v, err := s.get(planKey(session))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("plan mode of session", session)
	}
	p := &PlanMode{}
	return p, json.Unmarshal(v, p)
}
