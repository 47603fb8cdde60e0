package projections

import (
	"github.com/sylk/sylk/schemas"
)

// applyPermits folds permission requests and the user's decisions: a
// request opens an item keyed by its event id; a decision settles it, once,
// and a decision for the session or always also records a grant that later
// requests for the same action and grant are answered from. A decision for
// an unknown or already settled request, from another session, or with an
// unknown decision or scope is refused.
func applyPermits(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypePermissionRequest:
		p, err := payloadOf[schemas.PermissionRequest](t, Permits, ev)
		if p == nil {
			return err
		}
		switch {
		case !schemas.ValidName(p.Agent):
			return t.reject(Permits, ev, "permission_request names no agent (%q)", p.Agent)
		case p.Action != schemas.ActionCommand:
			return t.reject(Permits, ev, "permission_request: unknown action %q (known: %s)", p.Action, schemas.ActionCommand)
		case p.Target == "" || p.Grant == "":
			return t.reject(Permits, ev, "permission_request: target and grant must not be empty")
		}
		k := permitKey(env.SessionID, env.ID)
		old, err := load[Permit](t, k)
		if err != nil || old != nil {
			return err
		}
		store(t, k, &Permit{ID: env.ID, Session: env.SessionID, State: PermitOpen, PermissionRequest: *p, Seq: ev.seq, At: env.Timestamp})
		sid := env.SessionID
		store(t, permitAliasKey(env.ID), &sid)
	case schemas.TypePermissionDecision:
		p, err := payloadOf[schemas.PermissionDecision](t, Permits, ev)
		if p == nil {
			return err
		}
		switch {
		case p.Decision != schemas.DecisionAllow && p.Decision != schemas.DecisionDeny:
			return t.reject(Permits, ev, "permission_decision: decision %q: use %s or %s", p.Decision, schemas.DecisionAllow, schemas.DecisionDeny)
		case p.Scope != schemas.PermitOnce && p.Scope != schemas.PermitSession && p.Scope != schemas.PermitAlways:
			return t.reject(Permits, ev, "permission_decision: scope %q: use %s, %s or %s", p.Scope, schemas.PermitOnce, schemas.PermitSession, schemas.PermitAlways)
		}
		if env.Source != "user" {
			return t.reject(Permits, ev, "permission_decision from %s: only the user decides", env.Source)
		}
		sid, err := load[string](t, permitAliasKey(p.RequestID))
		if err != nil {
			return err
		}
		if sid == nil {
			return t.reject(Permits, ev, "no permission request %q", p.RequestID)
		}
		if *sid != env.SessionID {
			return t.reject(Permits, ev, "permission request %s is in session %s, not %s", p.RequestID, *sid, env.SessionID)
		}
		k := permitKey(*sid, p.RequestID)
		r, err := load[Permit](t, k)
		if err != nil || r == nil {
			return err
		}
		if r.State != PermitOpen {
			return t.reject(Permits, ev, "permission request %s was already %s at seq %d", p.RequestID, r.State, r.DecisionSeq)
		}
		r.State = PermitDenied
		if p.Decision == schemas.DecisionAllow {
			r.State = PermitAllowed
		}
		r.Scope, r.DecisionReason, r.DecidedBy, r.DecisionSeq, r.DecidedAt = p.Scope, p.Reason, env.Source, ev.seq, env.Timestamp
		store(t, k, r)
		if p.Scope == schemas.PermitOnce {
			return nil
		}
		g := &PermitGrant{Scope: p.Scope, Action: r.Action, Grant: r.Grant, Allow: p.Decision == schemas.DecisionAllow,
			RequestID: r.ID, Seq: ev.seq, At: env.Timestamp}
		if p.Scope == schemas.PermitSession {
			g.Session = r.Session
		}
		store(t, permitGrantKey(g.Session, g.Action, g.Grant), g)
	}
	return nil
}
