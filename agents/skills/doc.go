// Package skills gives agent loops skills (instructions loaded when the work
// calls for them) and lazy tool loading (a prompt carries the schemas of the
// few tools it uses), every decision an event.
//
// # The SKILL.md format
//
// A skill is a directory whose name is the skill's name and which holds a
// SKILL.md (the Agent Skills convention): YAML frontmatter between two "---"
// lines, then a markdown body of instructions.
//
//	---
//	name: go-testing                 # = the directory's name, [a-z0-9-]{1,64},
//	                                 # no '-' at either end or twice in a row
//	description: Write and run Go tests ... Use when ...   # 1-1024 characters
//	license: MIT                     # optional
//	compatibility: needs go 1.24     # optional, at most 500 characters
//	allowed-tools: exec read_file    # optional; space-separated or a list
//	metadata:                        # optional; Sylk's keys:
//	  agents: engineer tester        #   who may load it (default: every agent)
//	  tier: 2                        #   0-3 (default 2), see below
//	  load-trigger: test|coverage    #   words/phrases joined by '|', or an RE2 pattern
//	  keywords: go test              #   the trigger when load-trigger is absent
//	  priority: 70                   #   0-100 (default 50), higher loads first
//	---
//	# Instructions ...
//
// The frontmatter is strict: a key the format does not have is an error, as
// is a duplicate key, a value of the wrong type, a tier outside 0-3 or a load
// trigger that does not compile. Other keys under metadata are kept as text
// (the specification allows any). [Parse] reports every problem at once.
// Optional subdirectories references/, assets/ and scripts/ are listed in the
// prompt with the skill's base directory so the model can read them; scripts
// are never run automatically.
//
// # Search order
//
// [SearchPath]: the project's .sylk/skills, .agent/skills, .claude/skills
// (the project is the node's work directory), then the user's directories
// ([UserDirs]: $XDG_CONFIG_HOME/sylk/skills or ~/.config/sylk/skills, then
// ~/.agent/skills, ~/.claude/skills), then the skills built into the binary
// ([Builtin]). The first location that holds a name wins; a later skill of
// the same name is recorded as shadowed. A broken skill is recorded as failed
// and skipped. A [Cache] (a file in the data directory) keeps the parsed
// skills between discoveries, keyed by each SKILL.md's path, size and
// modification time: only changed files are parsed again.
//
// # Selection: progressive disclosure
//
// For each prompt node attempt, [Select] chooses, for the node's agent:
// first the skills the node names (its skills: field, any tier; an unknown
// name is a failure with its reason), then the agent's tier 0 and 1 skills
// (loaded at start), then its tier 2 skills whose load trigger matches the
// task; tier 3 skills load only when named (load-trigger: explicit_request
// means tier 3). A trigger matches case-folded and at word boundaries: "fix"
// matches "Fix the bug" but not "prefix". A tier 2 skill without a trigger
// uses its keywords, else its name ("pdf-forms" matches "PDF forms"). Within
// each group higher priority comes first, then the name. At most
// Limits.MaxSkills (4) load per step, the rest are recorded as skipped; a
// body over Limits.MaxBodyChars (20,000 characters) is cut and recorded as
// truncated.
//
// # Lazy tool loading
//
// The system prompt carries a manifest of every tool the agent may use (name
// and one line) and the bundles; the request offers only the schemas of
// request_tools (tier 0, always) and the loaded tools: the agent's core tools
// ([DefaultCore]), those its selected skills allow (never widening its
// permissions) and those it loaded earlier in the session. request_tools
// takes exactly one of tools (names, at most 10), bundle or intent (matched
// against tool names and bundle use cases, deterministically); the schemas
// are offered on the loop's next request. A call of a tool that is permitted
// but not loaded is answered "not loaded" without running; an unknown or
// forbidden name is refused with the reason.
//
// Loaded tools expire (seed L22158: a TTL of 30 minutes): a tool the agent
// loaded earlier in the session is carried into its next node only while it
// was used (called, or loaded again by request_tools) within
// Config.ToolTTL before the node's dispatch; otherwise the node starts
// without it and a tools_unloaded event says why. The times are the events',
// so a redelivery, replay or re-execution decides the same.
//
// # Events
//
// The selection is recorded as skills_selected (bodies included) under a
// call id derived from the dispatch ([SelectionID]) before the first LLM
// call; a redelivery, replay or re-execution finds that record and reuses it
// without reading a skill file. skill_load_failed, skill_truncated and tools_unloaded explain
// it; tools_loaded records the initial set and every request_tools, whose
// answer is a recorded tool result like any other. The projection
// "skills" folds each agent's loadout per session.
package skills
