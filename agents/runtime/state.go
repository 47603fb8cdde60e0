package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// guideState answers the Guide's questions from the projections.
type guideState struct {
	store *projections.Store
	log   *events.Log
}

func (g guideState) WaitFor(ctx context.Context, seq uint64) error { return g.store.WaitFor(ctx, seq) }

func (g guideState) Status(ctx context.Context, session string) (string, error) {
	s, err := g.store.Session(ctx, session)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "session %s", s.ID)
	if s.Name != "" {
		fmt.Fprintf(&b, " (%s)", s.Name)
	}
	fmt.Fprintf(&b, ": %s", s.State)
	dags, err := g.store.DAGs(ctx, projections.DAGFilter{Session: session})
	if err != nil {
		return "", err
	}
	for _, d := range dags {
		fmt.Fprintf(&b, "\n  DAG %s %s: %s", d.ID, orID(d.Name), d.State)
		for _, st := range projections.NodeStates {
			if n := d.Counts[st]; n > 0 {
				fmt.Fprintf(&b, ", %d %s", n, st)
			}
		}
	}
	if pm, err := g.store.PlanMode(ctx, session); err == nil && pm.State != schemas.PlanIdle {
		fmt.Fprintf(&b, "\n  plan mode: %s", strings.ReplaceAll(pm.State, "_", " "))
		if v := pm.Current(); v != nil {
			fmt.Fprintf(&b, ", plan %s v%d: %s", v.PlanID, v.Version, v.Plan.Title)
		}
	}
	pending, err := g.store.Pending(ctx, session)
	if err != nil {
		return "", err
	}
	for _, p := range pending {
		fmt.Fprintf(&b, "\n  waiting on you: %s from %s: %s", p.Kind, p.Asker, firstLine(p.Question))
	}
	return b.String(), nil
}

func (g guideState) Sessions(ctx context.Context) (string, error) {
	all, err := g.store.Sessions(ctx, projections.SessionFilter{})
	if err != nil {
		return "", err
	}
	if len(all) == 0 {
		return "no sessions", nil
	}
	var b strings.Builder
	for i, s := range all {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s %-10s %s", s.ID, s.State, s.Name)
	}
	return b.String(), nil
}

// Event finds an event of a session by id in its log.
func (g guideState) Event(ctx context.Context, session, id string) (*schemas.Envelope, error) {
	q := projections.LogQuery{Session: session}
	for {
		page, err := g.store.SessionLog(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			env, err := schemas.Unmarshal(e.Data)
			if err == nil && env.ID == id {
				return env, nil
			}
		}
		if !page.More {
			return nil, fmt.Errorf("event %q in session %q: %w", id, session, projections.ErrNotFound)
		}
		q.From = page.Next
	}
}

func (g guideState) Asker(ctx context.Context, session, ref string) (string, bool) {
	p, err := g.store.PendingRequest(ctx, session, ref)
	if err != nil || p == nil || errors.Is(err, projections.ErrNotFound) {
		return "", false
	}
	return p.Asker, true
}

// PlanMode is the session's plan mode once the projections have applied
// seq; nil when the session never entered it.
func (g guideState) PlanMode(ctx context.Context, session string, seq uint64) (*projections.PlanMode, error) {
	if err := g.store.WaitFor(ctx, seq); err != nil {
		return nil, err
	}
	pm, err := g.store.PlanMode(ctx, session)
	if errors.Is(err, projections.ErrNotFound) {
		return nil, nil
	}
	return pm, err
}

// PlanWaits reports whether the plan planID waits for the user's answer.
func (g guideState) PlanWaits(ctx context.Context, session, planID string) bool {
	p, err := g.store.PendingRequest(ctx, session, planID)
	return err == nil && p.Kind == projections.KindPlan && p.State == projections.PendingOpen
}

func orID(name string) string {
	if name == "" {
		return "(unnamed)"
	}
	return name
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
