package projections

import (
	"slices"

	"github.com/sylk/sylk/schemas"
)

// maxLoadoutRefusals bounds the refusals a loadout keeps (the newest).
const maxLoadoutRefusals = 20

// applySkills folds what each agent of a session loaded: the skills its
// selections chose (skills_selected) and the tool schemas it loaded
// (tools_loaded), once each, with the first event that loaded them, and the
// tools it was refused.
func applySkills(t *tx, ev *event) error {
	env := ev.env
	if env == nil || (env.Type != schemas.TypeSkillsSelected && env.Type != schemas.TypeToolsLoaded) {
		return nil
	}
	var agent, node string
	var sel *schemas.SkillsSelected
	var loaded *schemas.ToolsLoaded
	var err error
	if env.Type == schemas.TypeSkillsSelected {
		if sel, err = payloadOf[schemas.SkillsSelected](t, Skills, ev); sel == nil {
			return err
		}
		agent, node = sel.Agent, sel.NodeID
	} else {
		if loaded, err = payloadOf[schemas.ToolsLoaded](t, Skills, ev); loaded == nil {
			return err
		}
		agent, node = loaded.Agent, loaded.NodeID
	}
	if !schemas.ValidName(agent) {
		return t.reject(Skills, ev, "%s names no agent (%q)", env.Type, agent)
	}
	k := loadoutKey(env.SessionID, agent)
	l, err := load[Loadout](t, k)
	if err != nil {
		return err
	}
	if l == nil {
		l = &Loadout{Session: env.SessionID, Agent: agent}
	}
	if sel != nil {
		for _, s := range sel.Skills {
			if !slices.ContainsFunc(l.Skills, func(x LoadedSkill) bool { return x.Name == s.Name }) {
				l.Skills = append(l.Skills, LoadedSkill{Name: s.Name, Tier: s.Tier, Reason: s.Reason, Node: node, Seq: ev.seq})
			}
		}
	} else {
		for _, n := range loaded.Loaded {
			if !slices.ContainsFunc(l.Tools, func(x LoadedTool) bool { return x.Name == n }) {
				l.Tools = append(l.Tools, LoadedTool{Name: n, Via: loaded.Via, Node: node, Seq: ev.seq})
			}
		}
		for _, r := range loaded.Rejected {
			l.Refused = append(l.Refused, RefusedTool{Name: r.Name, Reason: r.Reason, Seq: ev.seq})
		}
		if loaded.Error != "" {
			l.Refused = append(l.Refused, RefusedTool{Reason: loaded.Error, Seq: ev.seq})
		}
		if n := len(l.Refused); n > maxLoadoutRefusals {
			l.Refused = slices.Delete(l.Refused, 0, n-maxLoadoutRefusals)
		}
	}
	store(t, k, l)
	return nil
}
