package projections

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Consult is one direct consultation between agents and its answer.
type Consult struct {
	ID       string   `json:"id"`
	Session  string   `json:"session"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Question string   `json:"question"`
	Chain    []string `json:"chain,omitempty"`
	Blocking bool     `json:"blocking,omitempty"`
	// State is ConsultOpen, ConsultAnswered or ConsultRefused.
	State     string    `json:"state"`
	Answer    string    `json:"answer,omitempty"`
	Refused   string    `json:"refused,omitempty"`
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
	AnswerSeq uint64    `json:"answer_seq,omitempty"`
	// Parent is the asker's message the consultation was asked in (its
	// conversation); Delivered, for a non-blocking one, where its answer was
	// put into that conversation.
	Parent    string            `json:"parent,omitempty"`
	Delivered *ConsultDelivered `json:"delivered,omitempty"`
}

// ConsultDelivered is where the answer to a non-blocking consultation was put
// into the asker's conversation: before the model call Key (step Step).
type ConsultDelivered struct {
	Key  string `json:"key"`
	Step int    `json:"step"`
	Seq  uint64 `json:"seq"`
}

// Consult returns a consultation by its request's event id.
func (s *Store) Consult(_ context.Context, session, id string) (*Consult, error) {
	v, err := s.get(consultKey(session, id))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("consultation", id)
	}
	c := &Consult{}
	return c, json.Unmarshal(v, c)
}

// Consults lists a session's consultations in the order they were asked.
func (s *Store) Consults(_ context.Context, session string) ([]*Consult, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var out []*Consult
	err = scanPrefix(snap, consultPrefix(session), func(_, v []byte) error {
		c := &Consult{}
		if err := json.Unmarshal(v, c); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	slices.SortFunc(out, func(a, b *Consult) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}
