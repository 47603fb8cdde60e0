package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Records finds recorded selections and loadouts: projections.Store.
type Records interface {
	SkillSelection(ctx context.Context, callID string) (*schemas.SkillsSelected, uint64, error)
	Loadout(ctx context.Context, session, agent string) (*projections.Loadout, error)
}

// Config configures skills and lazy tool loading for agent loops. The zero
// value reads the project's directories and the built-in skills, with the
// default limits, core tools and bundles.
type Config struct {
	// UserDirs are read after the project's directories (UserDirs() for the
	// usual ones); none when empty.
	UserDirs []string
	Limits   Limits
	// Core are the tools each agent has loaded from the start (nil:
	// DefaultCore).
	Core map[string][]string
	// Bundles nil means DefaultBundles.
	Bundles []Bundle
	// MaxToolsPerRequest bounds one request_tools (0: 10).
	MaxToolsPerRequest int
	// Cache keeps parsed skills between discoveries (nil: every discovery
	// parses every file).
	Cache *Cache
	// ToolTTL is how long a tool loaded earlier in the session stays loaded
	// unused (neither called nor loaded again) before a node starts without
	// it (0: DefaultToolTTL; negative: never).
	ToolTTL time.Duration
}

// DefaultToolTTL is how long a loaded tool stays loaded unused (seed
// L22158: cache loaded tools, TTL 30 minutes).
const DefaultToolTTL = 30 * time.Minute

// Loop is what an agent loop starts with: the recorded selection, the tools
// it has loaded (changed by request_tools as the loop runs) and the
// system-prompt sections of both.
type Loop struct {
	Selection *schemas.SkillsSelected
	Tools     *ToolSet
	// Reused is true when the selection was recorded by an earlier delivery.
	Reused bool

	d    *agents.Delivery
	node *schemas.TaskDispatch
}

// Prompt is the system-prompt text of the loaded skills and the tool
// manifest.
func (l *Loop) Prompt() string {
	s := l.Tools.Manifest()
	if r := Render(l.Selection); r != "" {
		s += "\n" + r
	}
	return s
}

// SelectionID is the call id of a node attempt's selection: the same on every
// delivery of the dispatch.
func SelectionID(d *agents.Delivery, node *schemas.TaskDispatch) string {
	return tools.CallID(d.Env.ID, d.Agent, "skills", node.NodeID, fmt.Sprint(node.Attempt))
}

// Start selects the skills and the initial tools of a prompt node, once
// across deliveries: a selection recorded under SelectionID is reused as it
// is (skill files are not read again); otherwise the catalogue of project
// (the node's work directory), the user's directories and the built-in skills
// is read, Select chooses, the initial tools are the agent's core tools, those
// the selected skills allow and those it loaded earlier in the session, and
// the selection is appended before anything uses it. Then, on every delivery,
// the failures, truncations and the initial tool load are appended as events
// with ids derived from the selection, so a redelivery repeats none of them.
//
// permitted are the tools agent may use, known every tool that exists.
func (c Config) Start(ctx context.Context, d *agents.Delivery, records Records, node *schemas.TaskDispatch, project string, permitted []tools.ToolSpec, known []string) (*Loop, error) {
	callID := SelectionID(d, node)
	set := NewToolSet(d.Agent, permitted, known, c.Bundles, c.MaxToolsPerRequest)
	l := &Loop{Tools: set, d: d, node: node}
	rec, _, err := records.SkillSelection(ctx, callID)
	var selected *schemas.Envelope
	switch {
	case err == nil:
		l.Selection, l.Reused = rec, true
	case !errors.Is(err, projections.ErrNotFound):
		return nil, agents.Transient(fmt.Errorf("look up the recorded skill selection %s: %w", callID, err), 0)
	default:
		if l.Selection, err = c.selectNew(ctx, d, records, node, project, set); err != nil {
			return nil, err
		}
		l.Selection.CallID = callID
		if selected, err = d.Derive(schemas.TypeSkillsSelected, "user", "skills_selected/"+callID, l.Selection); err != nil {
			return nil, agents.Permanent(err)
		}
	}
	set.Load(l.Selection.Tools)
	return l, l.appendNotes(ctx, selected)
}

func (c Config) selectNew(ctx context.Context, d *agents.Delivery, records Records, node *schemas.TaskDispatch, project string, set *ToolSet) (*schemas.SkillsSelected, error) {
	cat := c.Cache.Discover(SearchPath(project, c.UserDirs), c.Limits.MaxBodyChars)
	sel := Select(cat, Request{Agent: d.Agent, Task: node.Prompt, Hints: node.Skills, Limits: c.Limits})
	sel.DAGID, sel.NodeID, sel.Attempt = node.DAGID, node.NodeID, node.Attempt
	core := c.Core
	if core == nil {
		core = DefaultCore
	}
	want := slices.Clone(core[d.Agent])
	want = append(want, cat.AllowedTools(sel)...)
	lo, err := records.Loadout(ctx, d.Env.SessionID, d.Agent)
	switch {
	case err == nil:
		var kept []string
		kept, sel.Unloaded = c.expire(lo.Tools, want, d.Env.Timestamp)
		want = append(want, kept...)
	case !errors.Is(err, projections.ErrNotFound):
		return nil, agents.Transient(fmt.Errorf("read the loadout of %s: %w", d.Agent, err), 0)
	}
	probe := NewToolSet(d.Agent, set.permitted, set.known, set.bundles, set.max)
	sel.RefusedTools = probe.Load(want)
	sel.Tools = probe.LoadedNames()
	return sel, nil
}

// expire splits the tools an agent loaded earlier in the session into those
// it keeps and those unused for longer than the TTL at now (the dispatch's
// time, so a redelivery decides the same), leaving alone the tools the node
// loads anyway (want). A tool with no time of use (folded before times were
// kept) is kept.
func (c Config) expire(loaded []projections.LoadedTool, want []string, now time.Time) (kept []string, unloaded []schemas.SkillNote) {
	ttl := c.ToolTTL
	if ttl == 0 {
		ttl = DefaultToolTTL
	}
	for _, t := range loaded {
		idle := now.Sub(t.Used)
		if ttl < 0 || t.Used.IsZero() || idle <= ttl || slices.Contains(want, t.Name) {
			kept = append(kept, t.Name)
			continue
		}
		unloaded = append(unloaded, schemas.SkillNote{Name: t.Name,
			Reason: fmt.Sprintf("unused for %s, longer than the TTL of %s (request_tools loads it again)", idle.Round(time.Second), ttl)})
	}
	return kept, unloaded
}

// appendNotes appends the events that explain the selection: one
// skill_load_failed per failure, one skill_truncated per cut body, the
// tools_unloaded of the expired tools and the tools_loaded of the initial
// set, after the selection itself when it is new (selected, else nil), all
// in one round trip before the loop's first model call.
func (l *Loop) appendNotes(ctx context.Context, selected *schemas.Envelope) error {
	sel := l.Selection
	var envs []*schemas.Envelope
	if selected != nil {
		envs = append(envs, selected)
	}
	add := func(t schemas.Type, key string, p any) error {
		env, err := l.d.Derive(t, "user", key, p)
		if err != nil {
			return agents.Permanent(err)
		}
		envs = append(envs, env)
		return nil
	}
	for i, f := range sel.Failed {
		if err := add(schemas.TypeSkillLoadFailed, fmt.Sprintf("skill_load_failed/%s/%d", sel.CallID, i),
			schemas.SkillLoadFailed{CallID: sel.CallID, Agent: sel.Agent, Name: f.Name, Path: f.Path, Error: f.Reason}); err != nil {
			return err
		}
	}
	for _, s := range sel.Skills {
		if s.Truncated {
			if err := add(schemas.TypeSkillTruncated, "skill_truncated/"+sel.CallID+"/"+s.Name,
				schemas.SkillTruncated{CallID: sel.CallID, Agent: sel.Agent, Name: s.Name, Chars: s.Chars, MaxChars: sel.MaxBodyChars}); err != nil {
				return err
			}
		}
	}
	if len(sel.Unloaded) > 0 {
		if err := add(schemas.TypeToolsUnloaded, "tools_unloaded/"+sel.CallID, schemas.ToolsUnloaded{CallID: sel.CallID, Agent: sel.Agent,
			DAGID: sel.DAGID, NodeID: sel.NodeID, Attempt: sel.Attempt, Tools: sel.Unloaded}); err != nil {
			return err
		}
	}
	if err := add(schemas.TypeToolsLoaded, "tools_loaded/"+sel.CallID, schemas.ToolsLoaded{CallID: sel.CallID, Agent: sel.Agent,
		DAGID: sel.DAGID, NodeID: sel.NodeID, Attempt: sel.Attempt, Via: "start", Loaded: sel.Tools, Rejected: sel.RefusedTools}); err != nil {
		return err
	}
	return l.d.AppendAllNow(ctx, envs...)
}

// RequestTools answers a request_tools call of the loop: run and recorded
// like any tool call (a redelivery reuses the recorded answer), applied to
// the loop's tools so the next request carries the new schemas, and recorded
// as a tools_loaded event.
func (l *Loop) RequestTools(ctx context.Context, records agents.ToolRecords, call tools.Call, where agents.ToolWhere) (schemas.ToolResult, error) {
	res, _, err := l.d.RunTool(ctx, requestRunner{l.Tools}, records, call, where)
	if err != nil {
		return res, err
	}
	var ans schemas.ToolsLoaded
	if err := json.Unmarshal([]byte(res.Data), &ans); err != nil {
		// A refusal before the runner (arguments that are not JSON) has no
		// data: the result's error says why.
		ans = schemas.ToolsLoaded{Error: res.Error}
	}
	l.Tools.Load(ans.Loaded)
	ans.CallID, ans.Agent, ans.Via = call.ID, l.d.Agent, RequestTools
	ans.DAGID, ans.NodeID, ans.Attempt = where.DAGID, where.NodeID, where.Attempt
	env, err := l.d.Derive(schemas.TypeToolsLoaded, "user", "tools_loaded/"+call.ID, ans)
	if err != nil {
		return res, agents.Permanent(err)
	}
	_, err = l.d.AppendNow(ctx, env)
	return res, err
}

// requestRunner runs request_tools against a tool set, changing nothing:
// the answer is applied once recorded.
type requestRunner struct{ set *ToolSet }

func (r requestRunner) Run(_ context.Context, _ string, call tools.Call) (tools.Result, error) {
	ans := r.set.Request(call.Args)
	data, err := json.Marshal(ans)
	if err != nil {
		return tools.Result{}, err
	}
	out := tools.Result{CallID: call.ID, Tool: call.Tool, OK: ans.Error == "" || len(ans.Loaded) > 0, Data: data}
	var b strings.Builder
	if len(ans.Loaded) > 0 {
		fmt.Fprintf(&b, "loaded: %s (their schemas come with your next request).", strings.Join(ans.Loaded, ", "))
	}
	for _, rj := range ans.Rejected {
		fmt.Fprintf(&b, " refused %s: %s.", rj.Name, rj.Reason)
	}
	out.Summary = strings.TrimSpace(b.String())
	if ans.Error != "" {
		out.Error = ans.Error
		out.ExitCode = 1
	}
	return out, nil
}
