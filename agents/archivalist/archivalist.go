// Package archivalist is the Archivalist: it records what happened, across
// sessions, as history_entry events (seed L1918-1942): workflow outcomes,
// failures, rejected plans and DAGs, decisions, and what agents ask it to
// store. The history projection makes them queryable (`sylk history`).
package archivalist

import (
	"context"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Name is the Archivalist's agent name.
const Name = "archivalist"

// History categories.
const (
	CategoryOutcome  = "outcome"
	CategoryFailure  = "failure"
	CategoryDecision = "decision"
	CategoryNote     = "note"
)

// Watched are the message types the Archivalist records wherever they are
// addressed, besides those addressed to it.
var Watched = []schemas.Type{
	schemas.TypeWorkflowComplete, schemas.TypeTaskFailed, schemas.TypeTaskHelp, schemas.TypeDAGRejected,
	schemas.TypePlanApproved, schemas.TypePlanModified, schemas.TypeDeadLetter,
}

// Filters are the Archivalist's consumer subjects.
func Filters() []string {
	out := []string{events.Filter{Target: Name}.Subject()}
	for _, t := range Watched {
		out = append(out, events.Filter{Type: t}.Subject())
	}
	return out
}

// Archivalist records history.
type Archivalist struct{}

// Handle records one event, or answers what is addressed to it.
func (Archivalist) Handle(_ context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	if d.Env.Metadata[agents.MetaRoutedBy] != "" {
		return nil, nil // a copy the Guide routed: its original is recorded
	}
	e, ok, err := entryOf(d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if !ok {
		return nil, nil
	}
	out, err := d.Derive(schemas.TypeHistoryEntry, "user", "history", e)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{out}, nil
}

// entryOf is the history entry an event makes, if it makes one.
func entryOf(env *schemas.Envelope) (schemas.HistoryEntry, bool, error) {
	var e schemas.HistoryEntry
	switch env.Type {
	case schemas.TypeWorkflowComplete:
		p, err := schemas.PayloadAs[schemas.WorkflowComplete](env)
		if err != nil {
			return e, false, err
		}
		cat := CategoryOutcome
		if p.Outcome != schemas.OutcomeSucceeded {
			cat = CategoryFailure
		}
		return schemas.HistoryEntry{Category: cat, DAGID: p.DAGID, Summary: fmt.Sprintf("workflow %s %s: %s", p.DAGID, p.Outcome, p.Summary),
			Tags: []string{"workflow", p.Outcome}}, true, nil
	case schemas.TypeTaskFailed:
		p, err := schemas.PayloadAs[schemas.TaskFailed](env)
		if err != nil {
			return e, false, err
		}
		return schemas.HistoryEntry{Category: CategoryFailure, DAGID: p.DAGID, NodeID: p.NodeID,
			Summary: fmt.Sprintf("node %s attempt %d failed: %s", p.NodeID, p.Attempt, firstLine(p.Error)), Detail: p.Evidence,
			Tags: []string{"task", env.Source}}, true, nil
	case schemas.TypeTaskHelp:
		p, err := schemas.PayloadAs[schemas.TaskHelp](env)
		if err != nil {
			return e, false, err
		}
		return schemas.HistoryEntry{Category: CategoryFailure, DAGID: p.DAGID, NodeID: p.NodeID,
			Summary: fmt.Sprintf("node %s needs help: %s", p.NodeID, p.Reason), Detail: strings.Join(p.Failures, "\n"),
			Tags: []string{"help", env.Source}}, true, nil
	case schemas.TypeDAGRejected:
		p, err := schemas.PayloadAs[schemas.DAGRejected](env)
		if err != nil {
			return e, false, err
		}
		return schemas.HistoryEntry{Category: CategoryFailure, DAGID: p.DAGID,
			Summary: fmt.Sprintf("DAG %s rejected: %d problems", p.DAGID, len(p.Problems)), Detail: strings.Join(p.Problems, "\n"),
			Tags: []string{"dag", "rejected"}}, true, nil
	case schemas.TypePlanApproved:
		p, err := schemas.PayloadAs[schemas.PlanApproved](env)
		if err != nil {
			return e, false, err
		}
		return schemas.HistoryEntry{Category: CategoryDecision, Summary: "plan " + p.PlanID + " approved", Tags: []string{"plan"}}, true, nil
	case schemas.TypePlanModified:
		p, err := schemas.PayloadAs[schemas.PlanModified](env)
		if err != nil {
			return e, false, err
		}
		verb := "changes asked"
		if p.Rejected {
			verb = "rejected"
		}
		return schemas.HistoryEntry{Category: CategoryDecision, Summary: fmt.Sprintf("plan %s %s: %s", p.PlanID, verb, p.Feedback), Tags: []string{"plan"}}, true, nil
	case schemas.TypeDeadLetter:
		p, err := schemas.PayloadAs[schemas.DeadLetter](env)
		if err != nil {
			return e, false, err
		}
		return schemas.HistoryEntry{Category: CategoryFailure, Summary: fmt.Sprintf("%s gave up on seq %d: %s", p.Consumer, p.StreamSeq, firstLine(p.Reason)),
			Tags: []string{"dead_letter", p.Consumer}}, true, nil
	case schemas.TypeStoreRequest:
		p, err := schemas.PayloadAs[schemas.StoreRequest](env)
		if err != nil {
			return e, false, err
		}
		cat := p.Category
		if cat == "" {
			cat = CategoryNote
		}
		return schemas.HistoryEntry{Category: cat, Summary: firstLine(p.Content), Detail: p.Content, Tags: p.Tags}, true, nil
	}
	return e, false, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:199] + "…"
	}
	return s
}
