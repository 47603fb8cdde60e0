package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// Loadout is what one agent loaded in one session: skills and tool schemas,
// each with the first event that loaded it, and the newest tool refusals.
type Loadout struct {
	Session string        `json:"session"`
	Agent   string        `json:"agent"`
	Skills  []LoadedSkill `json:"skills,omitempty"`
	Tools   []LoadedTool  `json:"tools,omitempty"`
	Refused []RefusedTool `json:"refused,omitempty"`
	// Unloaded are the newest tools that expired (tools_unloaded).
	Unloaded []UnloadedTool `json:"unloaded,omitempty"`
}

// LoadedSkill is a skill a selection chose.
type LoadedSkill struct {
	Name   string `json:"name"`
	Tier   int    `json:"tier"`
	Reason string `json:"reason"`
	Node   string `json:"node,omitempty"`
	Seq    uint64 `json:"seq"`
}

// LoadedTool is a tool whose schema was loaded, and how ("start" or
// "request_tools"); Used is the time of its last load or call, from which
// it expires.
type LoadedTool struct {
	Name string    `json:"name"`
	Via  string    `json:"via"`
	Node string    `json:"node,omitempty"`
	Seq  uint64    `json:"seq"`
	Used time.Time `json:"used,omitzero"`
}

// UnloadedTool is a tool that expired: Seq is the tools_unloaded event.
type UnloadedTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Node   string `json:"node,omitempty"`
	Seq    uint64 `json:"seq"`
}

// RefusedTool is a tool load refused; Name is empty when the whole request
// was.
type RefusedTool struct {
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
	Seq    uint64 `json:"seq"`
}

// Loadout returns what agent loaded in session; ErrNotFound if nothing.
func (s *Store) Loadout(ctx context.Context, session, agent string) (*Loadout, error) {
	v, err := s.get(loadoutKey(session, agent))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("loadout of session "+session+" agent", agent)
	}
	l := &Loadout{}
	if err := json.Unmarshal(v, l); err != nil {
		return nil, fmt.Errorf("decode loadout %s/%s: %w", session, agent, err)
	}
	return l, nil
}

// Loadouts lists the loadouts of a session, by agent.
func (s *Store) Loadouts(ctx context.Context, session string) ([]*Loadout, error) {
	p := under(key("skills/a/", session))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	out := []*Loadout{}
	for valid := it.First(); valid; valid = it.Next() {
		l := &Loadout{}
		if err := json.Unmarshal(it.Value(), l); err != nil {
			return nil, errorsJoin(fmt.Errorf("decode loadout at %q: %w", it.Key(), err), it.Close())
		}
		out = append(out, l)
	}
	return out, errorsJoin(it.Error(), it.Close())
}

// SkillSelection returns the recorded skill selection of a call id and the
// sequence of its event; ErrNotFound if none is recorded.
func (s *Store) SkillSelection(ctx context.Context, callID string) (*schemas.SkillsSelected, uint64, error) {
	seq, env, err := s.call(skillsCallKey(callID), schemas.TypeSkillsSelected, callID)
	if err != nil {
		return nil, 0, err
	}
	r, err := schemas.PayloadAs[schemas.SkillsSelected](env)
	return r, seq, err
}
