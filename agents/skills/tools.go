package skills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// RequestTools is the tier-0 tool every agent loop has: it loads the schemas
// of more tools (seed L22176-22227).
const RequestTools = "request_tools"

// DefaultMaxToolsPerRequest is how many tools one request_tools may load.
const DefaultMaxToolsPerRequest = 10

// Bundle is a named group of tools loaded together.
type Bundle struct {
	Name        string
	Description string
	Tools       []string
	// UseCases are words an intent is matched against.
	UseCases []string
}

// DefaultBundles group the built-in tools (seed L22368-22451).
var DefaultBundles = []Bundle{
	{Name: "file_ops", Description: "read, write and edit files", Tools: []string{tools.ToolReadFile, tools.ToolWriteFile, tools.ToolEditFile},
		UseCases: []string{"read", "write", "edit", "change", "create", "file", "files", "modify"}},
	{Name: "search", Description: "find files and text", Tools: []string{tools.ToolList, tools.ToolGlob, tools.ToolGrep},
		UseCases: []string{"find", "search", "list", "look", "where", "grep", "locate"}},
	{Name: "git", Description: "inspect and commit changes", Tools: []string{tools.ToolGitStatus, tools.ToolGitDiff, tools.ToolGitCommit},
		UseCases: []string{"git", "commit", "diff", "status", "changes", "changed"}},
	{Name: "execution", Description: "run commands, builds and tests", Tools: []string{tools.ToolExec},
		UseCases: []string{"run", "build", "test", "tests", "command", "execute", "compile"}},
}

// DefaultCore are the tools an agent's loop has loaded from its start,
// besides request_tools: what each agent needs on almost every task.
var DefaultCore = map[string][]string{
	"engineer":  {tools.ToolReadFile, tools.ToolEditFile, tools.ToolWriteFile, tools.ToolExec},
	"inspector": {tools.ToolReadFile, tools.ToolGrep, tools.ToolExec},
	"tester":    {tools.ToolReadFile, tools.ToolWriteFile, tools.ToolExec},
}

// requestToolsSchema is the JSON Schema of request_tools' arguments: exactly
// one of tools, bundle, intent.
const requestToolsSchema = `{"type":"object","properties":{` +
	`"tools":{"type":"array","items":{"type":"string"},"description":"Names of tools to load, from the manifest."},` +
	`"bundle":{"type":"string","description":"A bundle to load all of."},` +
	`"intent":{"type":"string","description":"What you are trying to do; the tools that fit are loaded."}},` +
	`"oneOf":[{"required":["tools"]},{"required":["bundle"]},{"required":["intent"]}],"additionalProperties":false}`

// RequestToolsSpec is request_tools as the model sees it.
func RequestToolsSpec() tools.ToolSpec {
	return tools.ToolSpec{Name: RequestTools, ReadOnly: true, Parameters: json.RawMessage(requestToolsSchema),
		Description: "Load more tools: give exactly one of tools (names from the manifest), bundle, or intent. " +
			"Their schemas come with your next request."}
}

// ToolSet is the tools one agent loop knows: every tool the agent may use
// (the manifest) and the few whose schemas it has loaded.
type ToolSet struct {
	agent     string
	permitted []tools.ToolSpec
	byName    map[string]tools.ToolSpec
	known     []string // every tool that exists, permitted or not
	bundles   []Bundle
	max       int
	loaded    []string // in load order
}

// NewToolSet is the set of agent, which may use permitted among the tools
// named known; bundles nil means DefaultBundles, max 0 means
// DefaultMaxToolsPerRequest.
func NewToolSet(agent string, permitted []tools.ToolSpec, known []string, bundles []Bundle, max int) *ToolSet {
	if bundles == nil {
		bundles = DefaultBundles
	}
	if max <= 0 {
		max = DefaultMaxToolsPerRequest
	}
	s := &ToolSet{agent: agent, permitted: permitted, byName: map[string]tools.ToolSpec{}, known: known, bundles: bundles, max: max}
	for _, t := range permitted {
		s.byName[t.Name] = t
	}
	return s
}

// Permitted reports whether the agent may use the tool.
func (s *ToolSet) Permitted(name string) bool { _, ok := s.byName[name]; return ok }

// Loaded reports whether the tool's schema is loaded.
func (s *ToolSet) Loaded(name string) bool { return slices.Contains(s.loaded, name) }

// LoadedNames are the loaded tools, in load order.
func (s *ToolSet) LoadedNames() []string { return slices.Clone(s.loaded) }

// Load marks names loaded (those permitted, once each) and returns the ones
// refused, with the reason.
func (s *ToolSet) Load(names []string) (refused []schemas.SkillNote) {
	for _, n := range names {
		if reason := s.refusal(n); reason != "" {
			refused = append(refused, schemas.SkillNote{Name: n, Reason: reason})
			continue
		}
		if !s.Loaded(n) {
			s.loaded = append(s.loaded, n)
		}
	}
	return refused
}

func (s *ToolSet) refusal(name string) string {
	switch {
	case s.Permitted(name):
		return ""
	case slices.Contains(s.known, name):
		return fmt.Sprintf("permission denied: %s may not use %s", s.agent, name)
	}
	return fmt.Sprintf("unknown tool %q (the manifest lists %s)", name, strings.Join(s.names(), ", "))
}

func (s *ToolSet) names() []string {
	out := make([]string, len(s.permitted))
	for i, t := range s.permitted {
		out[i] = t.Name
	}
	return out
}

// Specs are the schemas the next request offers: request_tools and the
// loaded tools, sorted by name.
func (s *ToolSet) Specs() []tools.ToolSpec {
	out := []tools.ToolSpec{RequestToolsSpec()}
	for _, n := range s.loaded {
		out = append(out, s.byName[n])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Manifest is the system-prompt section listing every tool the agent may use,
// one line each, which are loaded, and the bundles.
func (s *ToolSet) Manifest() string {
	var b strings.Builder
	b.WriteString("## Tools\nYou may use these tools. Those marked * have their schemas loaded; " +
		"load others with request_tools (exactly one of tools, bundle or intent) before you call them.\n")
	for _, t := range s.permitted {
		mark := " "
		if s.Loaded(t.Name) {
			mark = "*"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", mark, t.Name, oneLine(t.Description))
	}
	var bs []string
	for _, bd := range s.bundles {
		if ts := s.allowedOf(bd.Tools); len(ts) > 0 {
			bs = append(bs, fmt.Sprintf("%s (%s: %s)", bd.Name, bd.Description, strings.Join(ts, ", ")))
		}
	}
	if len(bs) > 0 {
		b.WriteString("Bundles: " + strings.Join(bs, "; ") + "\n")
	}
	return b.String()
}

func (s *ToolSet) allowedOf(names []string) []string {
	var out []string
	for _, n := range names {
		if s.Permitted(n) {
			out = append(out, n)
		}
	}
	return out
}

// oneLine is the first sentence of a description, at most 100 characters.
func oneLine(d string) string {
	d, _, _ = strings.Cut(strings.TrimSpace(d), "\n")
	if i := strings.Index(d, ". "); i > 0 {
		d = d[:i+1]
	}
	return head(d, 100)
}

// ToolsRequest is request_tools' arguments.
type ToolsRequest struct {
	Tools  []string `json:"tools,omitempty"`
	Bundle string   `json:"bundle,omitempty"`
	Intent string   `json:"intent,omitempty"`
}

// Request answers a request_tools call without changing the set: what it
// loads, what it refuses and why, or why the whole request is refused. The
// caller records the answer and applies it with Load.
func (s *ToolSet) Request(args json.RawMessage) schemas.ToolsLoaded {
	var r ToolsRequest
	out := schemas.ToolsLoaded{Agent: s.agent, Via: RequestTools}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		out.Error = fmt.Sprintf("the arguments are not {\"tools\": [...]} or {\"bundle\": \"...\"} or {\"intent\": \"...\"}: %v", err)
		return out
	}
	out.Tools, out.Bundle, out.Intent = r.Tools, r.Bundle, r.Intent
	given := 0
	for _, set := range []bool{r.Tools != nil, r.Bundle != "", r.Intent != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		out.Error = fmt.Sprintf("give exactly one of tools, bundle or intent (%d given)", given)
		return out
	}
	var want []string
	switch {
	case r.Tools != nil:
		if len(r.Tools) == 0 {
			out.Error = "tools is empty: name the tools to load"
			return out
		}
		if len(r.Tools) > s.max {
			out.Error = fmt.Sprintf("too many tools: %d asked, at most %d per request", len(r.Tools), s.max)
			return out
		}
		want = r.Tools
	case r.Bundle != "":
		i := slices.IndexFunc(s.bundles, func(b Bundle) bool { return b.Name == r.Bundle })
		if i < 0 {
			var names []string
			for _, b := range s.bundles {
				names = append(names, b.Name)
			}
			out.Error = fmt.Sprintf("unknown bundle %q (bundles: %s)", r.Bundle, strings.Join(names, ", "))
			return out
		}
		want = s.bundles[i].Tools
	default:
		want = s.suggest(r.Intent)
		if len(want) == 0 {
			out.Error = fmt.Sprintf("no tool fits the intent %q: name the tools from the manifest instead", head(r.Intent, 100))
			return out
		}
	}
	probe := &ToolSet{agent: s.agent, byName: s.byName, permitted: s.permitted, known: s.known}
	out.Rejected = probe.Load(want)
	out.Loaded = probe.loaded
	if len(out.Loaded) == 0 && out.Error == "" {
		out.Error = "nothing loaded: every tool asked for was refused"
	}
	return out
}

// suggest is the permitted tools an intent names or whose bundle's use cases
// it mentions, at most 5: a deterministic stand-in for the seed's embedding
// search, so a replay suggests the same.
func (s *ToolSet) suggest(intent string) []string {
	t := NewTask(intent)
	var out []string
	add := func(n string) {
		if s.Permitted(n) && !slices.Contains(out, n) && len(out) < 5 {
			out = append(out, n)
		}
	}
	for _, p := range s.permitted {
		if _, ok := literalMatcher([]string{p.Name}).find(t); ok {
			add(p.Name)
		}
	}
	for _, b := range s.bundles {
		if _, ok := literalMatcher(b.UseCases).find(t); ok {
			for _, n := range b.Tools {
				add(n)
			}
		}
	}
	return out
}
