package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sylk/sylk/schemas"
)

// Permit states.
const (
	PermitOpen    = "open"
	PermitAllowed = "allowed"
	PermitDenied  = "denied"
)

// Permit is a permission request and, once the user answered, the decision.
type Permit struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	State   string `json:"state"`
	schemas.PermissionRequest
	Seq            uint64    `json:"seq"`
	At             time.Time `json:"at"`
	Scope          string    `json:"scope,omitempty"`
	DecisionReason string    `json:"decision_reason,omitempty"`
	DecidedBy      string    `json:"decided_by,omitempty"`
	DecisionSeq    uint64    `json:"decision_seq,omitempty"`
	DecidedAt      time.Time `json:"decided_at,omitzero"`
}

// PermitGrant is a remembered answer: Allow (or deny) Action on Grant in
// Session, or in every session when Session is empty (scope always).
type PermitGrant struct {
	Scope     string    `json:"scope"`
	Session   string    `json:"session,omitempty"`
	Action    string    `json:"action"`
	Grant     string    `json:"grant"`
	Allow     bool      `json:"allow"`
	RequestID string    `json:"request_id"`
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
}

// PermitFilter selects permission requests: of one session ("" all), in one
// state ("" any).
type PermitFilter struct {
	Session string
	State   string
}

// Permits lists permission requests, by session then in the order they were
// asked.
func (s *Store) Permits(ctx context.Context, f PermitFilter) ([]*Permit, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	p := []byte("permits/r/")
	if f.Session != "" {
		p = under(key("permits/r/", f.Session))
	}
	out := []*Permit{}
	err = scanPrefix(snap, p, func(k, v []byte) error {
		r := &Permit{}
		if err := json.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode permission request at %q: %w", k, err)
		}
		if f.State == "" || r.State == f.State {
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// Permit returns a permission request by id; ErrNotFound if there is none.
func (s *Store) Permit(ctx context.Context, id string) (*Permit, error) {
	raw, err := s.get(permitAliasKey(id))
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, notFound("permission request", id)
	}
	var sid string
	if err := json.Unmarshal(raw, &sid); err != nil {
		return nil, fmt.Errorf("decode the session of permission request %s: %w", id, err)
	}
	v, err := s.get(permitKey(sid, id))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("permission request", id)
	}
	r := &Permit{}
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("decode permission request %s: %w", id, err)
	}
	return r, nil
}

// PermitGrants lists the remembered answers: those of every session (scope
// always) first, then each session's.
func (s *Store) PermitGrants(ctx context.Context) ([]*PermitGrant, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	out := []*PermitGrant{}
	err = scanPrefix(snap, []byte("permits/g/"), func(k, v []byte) error {
		g := &PermitGrant{}
		if err := json.Unmarshal(v, g); err != nil {
			return fmt.Errorf("decode permission grant at %q: %w", k, err)
		}
		out = append(out, g)
		return nil
	})
	return out, err
}

// PermitGrant returns the remembered answer for action on grant in session:
// the session's own, else the one of every session; ErrNotFound if neither.
func (s *Store) PermitGrant(ctx context.Context, session, action, grant string) (*PermitGrant, error) {
	for _, sid := range []string{session, ""} {
		v, err := s.get(permitGrantKey(sid, action, grant))
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		g := &PermitGrant{}
		if err := json.Unmarshal(v, g); err != nil {
			return nil, fmt.Errorf("decode permission grant %s %q: %w", action, grant, err)
		}
		return g, nil
	}
	return nil, notFound("permission grant for "+action, grant)
}
