// Package archivalist is the Archivalist: it records what happened, across
// sessions, as history_entry events (seed L1918-1942): workflow outcomes,
// failures, rejected plans and DAGs, decisions, and what agents ask it to
// store. The history projection makes them queryable (`sylk history`).
package archivalist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
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
	// CategoryConsultation files the summary of each direct consultation
	// between agents (seed L2942).
	CategoryConsultation = "consultation"
)

// Watched are the message types the Archivalist records wherever they are
// addressed, besides those addressed to it.
var Watched = []schemas.Type{
	schemas.TypeWorkflowComplete, schemas.TypeTaskFailed, schemas.TypeTaskHelp, schemas.TypeDAGRejected,
	schemas.TypePlanApproved, schemas.TypePlanModified, schemas.TypeDeadLetter, schemas.TypeConsultResponse,
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
type Archivalist struct {
	// Store is read for the node a failure happened in and for the failure
	// memory; nil records failures without them.
	Store projections.Reader
}

// Handle records one event, or answers what is addressed to it. A failed
// node's entry carries its approach and normalised error pattern, so the
// failure memory counts it; the second time the same approach fails the
// same way the user is warned, and from the fifth time told to try another
// approach.
func (a *Archivalist) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
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
	var notice *schemas.Envelope
	if e.ErrorPattern != "" && a.Store != nil {
		if e.Approach, err = a.approach(ctx, d.Env, e.DAGID, e.NodeID); err != nil {
			return nil, err
		}
		if notice, err = a.recurrence(ctx, d, &e); err != nil {
			return nil, err
		}
	}
	out, err := d.Derive(schemas.TypeHistoryEntry, "user", "history", e)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if notice != nil {
		return []*schemas.Envelope{out, notice}, nil
	}
	return []*schemas.Envelope{out}, nil
}

// approach is what a failed node tried: its agent, and its tool or prompt,
// and the node's name in its plan.
func (a *Archivalist) approach(ctx context.Context, env *schemas.Envelope, dag, node string) (string, error) {
	d, err := a.Store.SessionDAG(ctx, env.SessionID, dag)
	if errors.Is(err, projections.ErrNotFound) {
		return env.Source + " node " + node, nil
	}
	if err != nil {
		return "", err
	}
	n := d.Node(node)
	switch {
	case n == nil:
		return env.Source + " node " + node, nil
	case n.Tool != "":
		return fmt.Sprintf("%s %s (node %s)", n.Agent, n.Tool, node), nil
	}
	return fmt.Sprintf("%s prompt %q", n.Agent, firstLine(n.Prompt)), nil
}

// recurrence counts the failure e in the failure memory (every session's)
// once the store has folded what was recorded so far, and returns the
// notice its count calls for, if any.
func (a *Archivalist) recurrence(ctx context.Context, d *agents.Delivery, e *schemas.HistoryEntry) (*schemas.Envelope, error) {
	if err := agents.CatchUp(ctx, d.Log(), a.Store); err != nil {
		return nil, err
	}
	sig := projections.FailureSignature(e.Approach, e.ErrorPattern)
	ms, err := a.Store.Failures(ctx, projections.FailureQuery{Signature: sig})
	if err != nil {
		return nil, err
	}
	n := 1
	if len(ms) > 0 {
		n += ms[0].Count
	}
	if n >= projections.WarnFailures {
		e.Tags = append(e.Tags, "recurring")
	}
	var text, hint string
	switch {
	case n == projections.WarnFailures:
		text = fmt.Sprintf("%s failed the same way before: %s", e.Approach, e.ErrorPattern)
		hint = "sylk history failures --search '" + firstWord(e.ErrorPattern) + "' shows where"
	case n >= projections.ChangeApproachFailures && n%projections.ChangeApproachFailures == 0:
		text = fmt.Sprintf("%s has failed %d times with: %s", e.Approach, n, e.ErrorPattern)
		hint = "try another approach rather than retrying this one"
	default:
		return nil, nil
	}
	out, err := d.Derive(schemas.TypeNotice, "user", "failure-memory", schemas.Notice{Level: schemas.NoticeWarn, Text: text, Hint: hint, Advisory: true})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return out, nil
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	return w
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
			Tags: []string{"task", env.Source}, ErrorPattern: ErrorPattern(p.Error)}, true, nil
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
	case schemas.TypeConsultResponse:
		p, err := schemas.PayloadAs[schemas.ConsultResponse](env)
		if err != nil {
			return e, false, err
		}
		summary, detail, tags := p.Summary, p.Answer, []string{"consult", env.Source, env.Target}
		if summary == "" {
			summary = env.Target + " -> " + env.Source
		}
		if p.Refused != "" {
			summary, detail, tags = summary+" (refused)", p.Refused, append(tags, "refused")
		}
		return schemas.HistoryEntry{Category: CategoryConsultation, Summary: summary, Detail: detail, Tags: tags}, true, nil
	case schemas.TypeMemoryCheckpoint:
		p, err := schemas.PayloadAs[schemas.MemoryCheckpoint](env)
		if err != nil {
			return e, false, err
		}
		return schemas.HistoryEntry{Category: p.Category, DAGID: p.DAGID, NodeID: p.NodeID,
			Summary: fmt.Sprintf("%s checkpoint %d of %s at %.0f%% of the context", p.Agent, p.Index, p.Key, p.ContextUsage*100),
			Detail:  p.Text, Tags: []string{"memory", p.Agent, p.Kind}}, true, nil
	case schemas.TypePipelineHandoff:
		p, err := schemas.PayloadAs[schemas.PipelineHandoff](env)
		if err != nil {
			return e, false, err
		}
		detail, _ := json.MarshalIndent(p, "", "  ")
		return schemas.HistoryEntry{Category: schemas.CategoryPipelineHandoff, DAGID: p.DAGID, NodeID: p.NodeID,
			Summary: fmt.Sprintf("pipeline %s handed to %s (handoff %d, loop %d): %s", p.OldPipelineID, p.NewPipelineID, p.HandoffIndex, p.Loop, p.Reason),
			Detail:  string(detail), Tags: []string{"memory", "handoff", env.Source}}, true, nil
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

// Normalising an error: what varies between two occurrences of the same
// failure (numbers, hex ids, paths, quoted values, durations) is replaced.
var (
	errQuoted   = regexp.MustCompile("\"[^\"]*\"|'[^']*'|`[^`]*`")
	errPath     = regexp.MustCompile(`(?:[A-Za-z]:)?[\w.~-]*(?:/[\w.@~+-]+)+/?`)
	errHex      = regexp.MustCompile(`\b(?:0x)?[0-9a-f]{8,}\b`)
	errDuration = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h)\b`)
	errNumber   = regexp.MustCompile(`\d+`)
	errSpace    = regexp.MustCompile(`\s+`)
)

// ErrorPattern is the normalised form of an error: its first line, lower
// case, with quoted values, paths, hex ids, durations and numbers replaced
// by <s>, <path>, <hex>, <dur> and <n>. Two failures with the same pattern
// failed the same way.
func ErrorPattern(err string) string {
	s := strings.ToLower(firstLine(err))
	s = errQuoted.ReplaceAllString(s, "<s>")
	s = errPath.ReplaceAllString(s, "<path>")
	s = errHex.ReplaceAllString(s, "<hex>")
	s = errDuration.ReplaceAllString(s, "<dur>")
	s = errNumber.ReplaceAllString(s, "<n>")
	return strings.TrimSpace(errSpace.ReplaceAllString(s, " "))
}
