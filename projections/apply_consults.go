package projections

import (
	"github.com/sylk/sylk/schemas"
)

// Consultation states.
const (
	ConsultOpen     = "open"
	ConsultAnswered = "answered"
	ConsultRefused  = "refused"
)

// applyConsults follows direct consultations between agents: a
// consult_request opens one (keyed by its event id), the consult_response
// naming it (request_id, else its parent) answers or refuses it. A second
// answer, or an answer to nothing asked, is refused.
func applyConsults(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypeConsultRequest:
		p, err := payloadOf[schemas.ConsultRequest](t, Consults, ev)
		if p == nil {
			return err
		}
		k := consultKey(env.SessionID, env.ID)
		old, err := load[Consult](t, k)
		if err != nil || old != nil {
			return err
		}
		store(t, k, &Consult{ID: env.ID, Session: env.SessionID, From: env.Source, To: env.Target, Question: p.Question,
			Chain: p.Chain, Blocking: p.Blocking, State: ConsultOpen, Seq: ev.seq, At: env.Timestamp, Parent: env.ParentID})
	case schemas.TypeConsultResponse:
		p, err := payloadOf[schemas.ConsultResponse](t, Consults, ev)
		if p == nil {
			return err
		}
		ref := p.RequestID
		if ref == "" {
			ref = env.ParentID
		}
		k := consultKey(env.SessionID, ref)
		c, err := load[Consult](t, k)
		switch {
		case err != nil:
			return err
		case c == nil:
			return t.reject(Consults, ev, "no consultation %q in session %s", ref, env.SessionID)
		case c.State != ConsultOpen:
			return t.reject(Consults, ev, "consultation %s was %s at seq %d", ref, c.State, c.AnswerSeq)
		}
		c.State, c.Answer, c.Refused, c.AnswerSeq = ConsultAnswered, p.Answer, p.Refused, ev.seq
		if p.Refused != "" {
			c.State = ConsultRefused
		}
		store(t, k, c)
	case schemas.TypeConsultDelivered:
		p, err := payloadOf[schemas.ConsultDelivered](t, Consults, ev)
		if p == nil {
			return err
		}
		k := consultKey(env.SessionID, p.RequestID)
		c, err := load[Consult](t, k)
		switch {
		case err != nil:
			return err
		case c == nil:
			return t.reject(Consults, ev, "no consultation %q in session %s", p.RequestID, env.SessionID)
		case c.State == ConsultOpen || c.Blocking:
			return t.reject(Consults, ev, "consultation %s is %s (blocking=%v): only a settled non-blocking one is delivered", p.RequestID, c.State, c.Blocking)
		case c.Delivered != nil:
			return t.reject(Consults, ev, "consultation %s was delivered at seq %d", p.RequestID, c.Delivered.Seq)
		}
		c.Delivered = &ConsultDelivered{Key: p.Key, Step: p.Step, Seq: ev.seq}
		store(t, k, c)
	}
	return nil
}
