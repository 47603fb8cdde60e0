package tools

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Names of the built-in tools.
const (
	ToolExec      = "exec"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolEditFile  = "edit_file"
	ToolList      = "list"
	ToolGlob      = "glob"
	ToolGrep      = "grep"
	ToolGitStatus = "git_status"
	ToolGitDiff   = "git_diff"
	ToolGitCommit = "git_commit"
)

// Groups usable in a policy's tool list. Each expands to an explicit list of
// tool names; a tool that is not listed is not in the group, so a tool added
// later is never granted by accident.
const (
	GroupRead  = "@read"  // read_file, list, glob, grep, git_status, git_diff
	GroupWrite = "@write" // write_file, edit_file
)

var groups = map[string][]string{
	GroupRead:  {ToolReadFile, ToolList, ToolGlob, ToolGrep, ToolGitStatus, ToolGitDiff},
	GroupWrite: {ToolWriteFile, ToolEditFile},
}

// builtinNames lists every built-in tool; Policy.Validate checks names
// against it.
var builtinNames = []string{
	ToolExec, ToolReadFile, ToolWriteFile, ToolEditFile, ToolList, ToolGlob,
	ToolGrep, ToolGitStatus, ToolGitDiff, ToolGitCommit,
}

// Policy is the per-agent allow-list of tools. Anything not allowed is
// denied: an agent without an entry may use no tool, and a tool name that is
// not listed (directly or through a group) is refused. It is meant to be
// read from configuration:
//
//	agents:
//	  engineer: {tools: [exec, "@read", "@write", git_commit]}
//	  inspector: {tools: [exec, "@read"], commands: ["go vet", "go test", gofmt]}
type Policy struct {
	Agents map[string]AgentPolicy `json:"agents" yaml:"agents"`
}

// AgentPolicy is what one agent may do.
type AgentPolicy struct {
	// Tools are tool names and groups (GroupRead, GroupWrite).
	Tools []string `json:"tools" yaml:"tools"`
	// Commands, when not empty, restricts exec to commands whose argv
	// starts with one of these space-separated word lists ("go test",
	// "gofmt"); the first word is compared with the base name of argv[0].
	// Shell mode is refused for such an agent, since a shell line cannot be
	// checked. Empty means any command.
	Commands []string `json:"commands,omitempty" yaml:"commands,omitempty"`
}

// DefaultPolicy returns the default allow-lists of the Sylk agents:
//
//   - engineer: exec, the read and write file tools, git_status, git_diff,
//     git_commit;
//   - tester: exec, the read and write file tools (the tester writes the
//     failing tests of a TDD pipeline), git_status, git_diff;
//   - inspector: exec and the read-only tools;
//   - librarian, architect (it explores in plan mode): the read-only tools;
//   - pipeline (the pipeline agent's own git work: snapshots, worktrees,
//     merging a selected variant): exec;
//   - orchestrator, guide, archivalist, academic: nothing.
//
// The seed's git matrix grants commits to the tester only when tests
// improved, a condition the agents layer checks; it can grant git_commit to
// the tester in configuration. Branch, history and remote operations (reset,
// push, merge, ...) are not tools at all.
func DefaultPolicy() Policy {
	return Policy{Agents: map[string]AgentPolicy{
		"engineer":     {Tools: []string{ToolExec, GroupRead, GroupWrite, ToolGitCommit}},
		"tester":       {Tools: []string{ToolExec, GroupRead, GroupWrite}},
		"inspector":    {Tools: []string{ToolExec, GroupRead}},
		"librarian":    {Tools: []string{GroupRead}},
		"architect":    {Tools: []string{GroupRead}},
		"orchestrator": {Tools: []string{}},
		"pipeline":     {Tools: []string{ToolExec}},
		"guide":        {Tools: []string{}},
		"archivalist":  {Tools: []string{}},
		"academic":     {Tools: []string{}},
	}}
}

// Validate checks that every name in the policy is a built-in tool or a
// group, and that command prefixes are not empty, so a typo ("git_comit")
// fails at start-up instead of silently denying.
func (p Policy) Validate() error {
	for agent, ap := range p.Agents {
		for _, t := range ap.Tools {
			if _, ok := groups[t]; ok {
				continue
			}
			if !slices.Contains(builtinNames, t) {
				return fmt.Errorf("%w: permissions: agent %q: unknown tool %q (known: %s, groups %s, %s)",
					ErrInvalidOptions, agent, t, strings.Join(builtinNames, ", "), GroupRead, GroupWrite)
			}
		}
		for _, c := range ap.Commands {
			if len(strings.Fields(c)) == 0 {
				return fmt.Errorf("%w: permissions: agent %q: empty command prefix", ErrInvalidOptions, agent)
			}
		}
	}
	return nil
}

// Allows reports whether agent may call tool. Unknown agents and unknown
// tools are denied.
func (p Policy) Allows(agent, tool string) bool {
	ap, ok := p.Agents[agent]
	if !ok {
		return false
	}
	for _, t := range ap.Tools {
		if t == tool {
			return slices.Contains(builtinNames, tool)
		}
		if slices.Contains(groups[t], tool) {
			return true
		}
	}
	return false
}

// AllowedTools returns the sorted names of the tools agent may call.
func (p Policy) AllowedTools(agent string) []string {
	var out []string
	for _, name := range builtinNames {
		if p.Allows(agent, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// WithCommands sets agent's command list (its project allow-list: the
// commands it runs without asking) in p, whose map it changes, and returns p.
func (p Policy) WithCommands(agent string, commands ...string) Policy {
	ap := p.Agents[agent]
	ap.Commands = commands
	p.Agents[agent] = ap
	return p
}

// AllowsCommand checks an exec call against the agent's command list: nil
// when the agent has none or argv starts with one of its entries, else an
// error wrapping ErrPermissionDenied that names the list.
func (p Policy) AllowsCommand(agent string, argv []string, shell bool) error {
	ap := p.Agents[agent]
	if len(ap.Commands) == 0 {
		return nil
	}
	if shell {
		return fmt.Errorf("%w: agent %q may run only %s, so shell mode is not allowed; pass argv",
			ErrPermissionDenied, agent, quoteList(ap.Commands))
	}
	for _, c := range ap.Commands {
		words := strings.Fields(c)
		if len(argv) < len(words) {
			continue
		}
		first := argv[0]
		if !strings.Contains(words[0], "/") {
			first = filepath.Base(first)
		}
		if first != words[0] || !slices.Equal(argv[1:len(words)], words[1:]) {
			continue
		}
		return nil
	}
	return fmt.Errorf("%w: agent %q may run only %s, not %q", ErrPermissionDenied, agent, quoteList(ap.Commands), truncForMsg(strings.Join(argv, " ")))
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
