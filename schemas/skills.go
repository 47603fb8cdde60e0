package schemas

// Skills and lazy tool loading (seed 003, seed L14807-14877, L21993-22718):
// which instructions an agent loaded for a task and why, and which tool
// schemas it has in its prompt. Each decision is an event so a redelivery, a
// replay or a re-execution reproduces the same prompt without reading the
// skill files again.
const (
	TypeSkillsSelected  Type = "skills_selected"
	TypeSkillLoadFailed Type = "skill_load_failed"
	TypeSkillTruncated  Type = "skill_truncated"
	TypeToolsLoaded     Type = "tools_loaded"
	TypeToolsUnloaded   Type = "tools_unloaded"
)

var skillTypes = map[Type]typeInfo{
	TypeSkillsSelected:  entry[SkillsSelected]("The skills an agent loaded for a prompt node, with their bodies and the reasons; recorded once under its call id."),
	TypeSkillLoadFailed: entry[SkillLoadFailed]("A skill that could not be used (bad SKILL.md, unknown hinted name, bad load trigger), and why."),
	TypeSkillTruncated:  entry[SkillTruncated]("A skill body cut to the size cap before it went into a prompt."),
	TypeToolsLoaded:     entry[ToolsLoaded]("Tool schemas an agent loaded into its prompt (at the start of a node or by request_tools), and the names it was refused."),
	TypeToolsUnloaded:   entry[ToolsUnloaded]("Tool schemas an agent loaded earlier in the session that expired (unused for longer than the TTL): not carried into its next node."),
}

// SkillsSelected is the outcome of one skill selection: the skills whose
// bodies go into the system prompt of a prompt node, in prompt order.
type SkillsSelected struct {
	// CallID is the selection's deterministic id (one per node attempt): a
	// redelivery finds this record and reuses it.
	CallID  string `json:"call_id"`
	Agent   string `json:"agent"`
	DAGID   string `json:"dag_id,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Task is the start of the task text the triggers were matched against.
	Task string `json:"task,omitempty"`
	// Strategy is "hint" when the task named skills, "match" when only tiers
	// and triggers chose, "none" when nothing was selected.
	Strategy string `json:"strategy"`
	// Discovered is how many skills the catalogue holds; Locations are the
	// directories it read, in search order.
	Discovered int      `json:"discovered"`
	Locations  []string `json:"locations,omitempty"`
	// Skills are the selected skills, bodies included.
	Skills []SelectedSkill `json:"skills,omitempty"`
	// Skipped are skills that qualified but were left out (the per-step cap).
	Skipped []SkillNote `json:"skipped,omitempty"`
	// Shadowed are names found in more than one location: the first wins.
	Shadowed []ShadowedSkill `json:"shadowed,omitempty"`
	// Failed are the skills that could not be used, with the reason.
	Failed []SkillNote `json:"failed,omitempty"`
	// Tools are the tool names loaded when the node starts: the agent's
	// core tools, those the selected skills allow, and those it loaded
	// earlier in the session.
	Tools []string `json:"tools,omitempty"`
	// RefusedTools are initial tools the agent may not use (a skill's
	// allowed-tools never widen its permissions).
	RefusedTools []SkillNote `json:"refused_tools,omitempty"`
	// Unloaded are tools loaded earlier in the session that expired (unused
	// for longer than the TTL) and are not carried into this node.
	Unloaded []SkillNote `json:"unloaded,omitempty"`
	// MaxBodyChars is the body cap the selection applied.
	MaxBodyChars int `json:"max_body_chars,omitempty"`
}

// SelectedSkill is one selected skill.
type SelectedSkill struct {
	Name   string `json:"name"`
	Tier   int    `json:"tier"`
	Source string `json:"source"`
	Dir    string `json:"dir,omitempty"`
	Reason string `json:"reason"`
	// Body is the markdown body as it went into the prompt; Chars is the
	// body's length before any truncation.
	Body      string `json:"body,omitempty"`
	Chars     int    `json:"chars"`
	Truncated bool   `json:"truncated,omitempty"`
}

// SkillNote names a skill and says why it is mentioned.
type SkillNote struct {
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason"`
}

// ShadowedSkill is a name found in two locations.
type ShadowedSkill struct {
	Name    string `json:"name"`
	Kept    string `json:"kept"`
	Dropped string `json:"dropped"`
}

// SkillLoadFailed reports a skill that could not be used.
type SkillLoadFailed struct {
	CallID string `json:"call_id,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	Error  string `json:"error"`
}

// SkillTruncated reports a body cut to MaxChars.
type SkillTruncated struct {
	CallID   string `json:"call_id,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Name     string `json:"name"`
	Chars    int    `json:"chars"`
	MaxChars int    `json:"max_chars"`
}

// ToolsLoaded records tool schemas loaded into an agent's prompt.
type ToolsLoaded struct {
	// CallID is the request_tools call (or the node's selection) it answers.
	CallID  string `json:"call_id"`
	Agent   string `json:"agent"`
	DAGID   string `json:"dag_id,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Via is "start" (the node's initial set) or "request_tools".
	Via string `json:"via"`
	// Requested is what request_tools asked for: tools, a bundle or an
	// intent.
	Tools  []string `json:"tools,omitempty"`
	Bundle string   `json:"bundle,omitempty"`
	Intent string   `json:"intent,omitempty"`
	// Loaded are the names whose schemas the next request carries.
	Loaded []string `json:"loaded,omitempty"`
	// Rejected are the names refused, each with its reason.
	Rejected []SkillNote `json:"rejected,omitempty"`
	// Error is why the whole request was refused (not exactly one of tools,
	// bundle, intent; too many tools).
	Error string `json:"error,omitempty"`
}

// ToolsUnloaded records tool schemas dropped from an agent's loadout when a
// node starts: loaded earlier in the session (by request_tools or a skill),
// unused (neither called nor loaded again) for longer than the TTL. The
// agent can load them again with request_tools.
type ToolsUnloaded struct {
	// CallID is the node's selection.
	CallID  string `json:"call_id"`
	Agent   string `json:"agent"`
	DAGID   string `json:"dag_id,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Tools are the names unloaded, each with the reason.
	Tools []SkillNote `json:"tools,omitempty"`
}
