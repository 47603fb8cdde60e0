package skills

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Defaults of Limits.
const (
	// DefaultMaxSkills is how many skills one selection loads.
	DefaultMaxSkills = 4
	// DefaultMaxBodyChars caps one skill body in a prompt (seed 003).
	DefaultMaxBodyChars = 20000
)

// Limits bound a selection.
type Limits struct {
	// MaxSkills is how many skills one step loads (default 4); the rest
	// are recorded as skipped.
	MaxSkills int
	// MaxBodyChars caps each body (default 20,000 characters); a longer one
	// is cut and recorded as truncated.
	MaxBodyChars int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSkills <= 0 {
		l.MaxSkills = DefaultMaxSkills
	}
	if l.MaxBodyChars <= 0 {
		l.MaxBodyChars = DefaultMaxBodyChars
	}
	return l
}

// Request is what a selection is for.
type Request struct {
	Agent string
	// Task is the text triggers are matched against.
	Task string
	// Hints are skills the task names: selected first, whatever their tier.
	Hints  []string
	Limits Limits
}

// truncMark ends a cut body.
const truncMark = "\n\n[... skill body truncated to %d characters; read the rest in the skill's directory ...]"

// Select chooses the skills of one step by progressive disclosure: first the
// skills the task names (any tier; an unknown or broken name, or one for
// other agents, is recorded as failed), then the agent's tier 0 and 1 skills,
// then its tier 2 skills whose trigger matches the task; tier 3 only when
// named. Within each group higher priority goes first, then the name. The
// first Limits.MaxSkills are loaded, the rest recorded as skipped. Bodies
// over Limits.MaxBodyChars are cut. The result holds every reason; its
// CallID and the node fields are the caller's to fill.
func Select(c *Catalogue, r Request) *schemas.SkillsSelected {
	lim := r.Limits.withDefaults()
	out := &schemas.SkillsSelected{Agent: r.Agent, Task: head(r.Task, 200), Discovered: len(c.Names), MaxBodyChars: lim.MaxBodyChars,
		Locations: c.Locations, Shadowed: c.Shadowed, Failed: slices.Clone(c.Failed)}
	type pick struct {
		s      *Skill
		reason string
	}
	var picks []pick
	chosen := map[string]bool{}
	for _, h := range r.Hints {
		s, ok := c.Skills[h]
		switch {
		case chosen[h]:
			continue
		case !ok && c.failed(h):
			continue // its failure is recorded already
		case !ok:
			out.Failed = append(out.Failed, schemas.SkillNote{Name: h, Reason: fmt.Sprintf("%v: the task names %q, which is not in the catalogue (%d skills)", ErrUnknown, h, len(c.Names))})
			continue
		case !s.For(r.Agent):
			out.Failed = append(out.Failed, schemas.SkillNote{Name: h, Path: s.Dir, Reason: fmt.Sprintf("the task names %q, which is for %s, not %s", h, strings.Join(s.Agents, ", "), r.Agent)})
			continue
		}
		chosen[h] = true
		picks = append(picks, pick{s, "named by the task"})
	}
	// c.order is by priority then name: each group comes out sorted.
	var core, matched []pick
	task := NewTask(r.Task)
	for _, s := range c.order {
		if chosen[s.Name] || !s.For(r.Agent) {
			continue
		}
		switch {
		case s.Tier <= 1:
			core = append(core, pick{s, tierReasons[s.Tier]})
		case s.Tier == 2 && s.match != nil:
			if w, ok := s.match.find(task); ok {
				matched = append(matched, pick{s, "tier 2: load trigger matched " + strconv.Quote(w)})
			}
		}
	}
	picks = append(append(picks, core...), matched...)
	capped := fmt.Sprintf(", but the cap of %d skills per step is reached", lim.MaxSkills)
	for i, p := range picks {
		if i >= lim.MaxSkills {
			out.Skipped = append(out.Skipped, schemas.SkillNote{Name: p.s.Name, Reason: p.reason + capped})
			continue
		}
		sel := schemas.SelectedSkill{Name: p.s.Name, Tier: p.s.Tier, Source: p.s.Source, Dir: p.s.Dir, Reason: p.reason, Chars: p.s.Chars, Body: p.s.Body}
		if p.s.Chars > lim.MaxBodyChars {
			sel.Body = string([]rune(p.s.Body)[:lim.MaxBodyChars]) + fmt.Sprintf(truncMark, lim.MaxBodyChars)
			sel.Truncated = true
		}
		out.Skills = append(out.Skills, sel)
	}
	switch {
	case len(r.Hints) > 0 && len(out.Skills) > 0 && out.Skills[0].Reason == "named by the task":
		out.Strategy = "hint"
	case len(out.Skills) > 0:
		out.Strategy = "match"
	default:
		out.Strategy = "none"
	}
	return out
}

var tierReasons = [2]string{"tier 0: loaded at agent start", "tier 1: loaded at agent start"}

func (c *Catalogue) failed(name string) bool {
	return slices.ContainsFunc(c.Failed, func(n schemas.SkillNote) bool { return n.Name == name })
}

// AllowedTools are the tools the selected skills name, in order, once each.
func (c *Catalogue) AllowedTools(sel *schemas.SkillsSelected) []string {
	var out []string
	for _, s := range sel.Skills {
		if sk, ok := c.Skills[s.Name]; ok {
			for _, t := range sk.AllowedTools {
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Render is the system-prompt section of the selected skills: each body
// between "Reading:"/"Base directory:" lines and a closing line (the
// OpenSkills read format), so the model knows where its references are.
func Render(sel *schemas.SkillsSelected) string {
	if len(sel.Skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Skills\nInstructions loaded for this task. Follow them where they apply. " +
		"Files they mention are in the base directory; scripts there are never run for you: run one only when the task needs it.\n")
	for _, s := range sel.Skills {
		fmt.Fprintf(&b, "\nReading: %s\nBase directory: %s\n\n%s\n\nSkill read: %s\n", s.Name, s.Dir, s.Body, s.Name)
	}
	return b.String()
}
