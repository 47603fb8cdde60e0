package projections

import (
	"slices"

	"github.com/sylk/sylk/schemas"
)

// maxLoadoutNotes bounds the refusals and the unloaded tools a loadout keeps
// (the newest).
const maxLoadoutNotes = 20

// applySkills folds what each agent of a session loaded: the skills its
// selections chose (skills_selected) and the tool schemas it loaded
// (tools_loaded), once each, with the first event that loaded them, and the
// tools it was refused; the time each tool was first loaded, loaded again by
// request_tools or called (tool_call from the agent), and the tools that
// expired (tools_unloaded), which leave the loaded ones.
func applySkills(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	var agent, node string
	var sel *schemas.SkillsSelected
	var loaded *schemas.ToolsLoaded
	var unloaded *schemas.ToolsUnloaded
	var err error
	switch env.Type {
	case schemas.TypeToolCall:
		return useTool(t, ev)
	case schemas.TypeSkillsSelected:
		if sel, err = payloadOf[schemas.SkillsSelected](t, Skills, ev); sel == nil {
			return err
		}
		agent, node = sel.Agent, sel.NodeID
	case schemas.TypeToolsLoaded:
		if loaded, err = payloadOf[schemas.ToolsLoaded](t, Skills, ev); loaded == nil {
			return err
		}
		agent, node = loaded.Agent, loaded.NodeID
	case schemas.TypeToolsUnloaded:
		if unloaded, err = payloadOf[schemas.ToolsUnloaded](t, Skills, ev); unloaded == nil {
			return err
		}
		agent, node = unloaded.Agent, unloaded.NodeID
	default:
		return nil
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
	switch {
	case sel != nil:
		for _, s := range sel.Skills {
			if !slices.ContainsFunc(l.Skills, func(x LoadedSkill) bool { return x.Name == s.Name }) {
				l.Skills = append(l.Skills, LoadedSkill{Name: s.Name, Tier: s.Tier, Reason: s.Reason, Node: node, Seq: ev.seq})
			}
		}
	case unloaded != nil:
		for _, u := range unloaded.Tools {
			l.Tools = slices.DeleteFunc(l.Tools, func(x LoadedTool) bool { return x.Name == u.Name })
			l.Unloaded = append(l.Unloaded, UnloadedTool{Name: u.Name, Reason: u.Reason, Node: node, Seq: ev.seq})
		}
		l.Unloaded = newest(l.Unloaded)
	default:
		for _, n := range loaded.Loaded {
			if i := slices.IndexFunc(l.Tools, func(x LoadedTool) bool { return x.Name == n }); i >= 0 {
				if loaded.Via != "start" { // a node's start carries tools over, it does not use them
					l.Tools[i].Used = env.Timestamp
				}
			} else {
				l.Tools = append(l.Tools, LoadedTool{Name: n, Via: loaded.Via, Node: node, Seq: ev.seq, Used: env.Timestamp})
			}
		}
		for _, r := range loaded.Rejected {
			l.Refused = append(l.Refused, RefusedTool{Name: r.Name, Reason: r.Reason, Seq: ev.seq})
		}
		if loaded.Error != "" {
			l.Refused = append(l.Refused, RefusedTool{Reason: loaded.Error, Seq: ev.seq})
		}
		l.Refused = newest(l.Refused)
	}
	store(t, k, l)
	return nil
}

// useTool marks a loaded tool used at the time of a call of it by the agent
// (the event's source) that loaded it.
func useTool(t *tx, ev *event) error {
	env := ev.env
	if !schemas.ValidName(env.Source) {
		return nil
	}
	k := loadoutKey(env.SessionID, env.Source)
	l, err := load[Loadout](t, k)
	if l == nil || err != nil {
		return err
	}
	call, err := payloadOf[schemas.ToolCall](t, Skills, ev)
	if call == nil {
		return err
	}
	i := slices.IndexFunc(l.Tools, func(x LoadedTool) bool { return x.Name == call.Tool })
	if i < 0 {
		return nil
	}
	l.Tools[i].Used = env.Timestamp
	store(t, k, l)
	return nil
}

// newest keeps the last maxLoadoutNotes of notes.
func newest[T any](notes []T) []T {
	if n := len(notes); n > maxLoadoutNotes {
		return slices.Delete(notes, 0, n-maxLoadoutNotes)
	}
	return notes
}
