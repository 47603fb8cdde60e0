package plan

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Catalog says which agents run nodes and which tools exist, and who may use
// which tool.
type Catalog struct {
	// ToolAgents are the agents that run tool nodes; PromptAgents those that
	// run prompt nodes.
	ToolAgents   []string
	PromptAgents []string
	// Tools are the known tool names.
	Tools []string
	// Allowed reports whether agent may use tool; nil allows everything known.
	Allowed func(agent, tool string) bool
	// ArgSchemas are the JSON Schemas of the tools' arguments, by tool: a
	// tool node's args are checked against its tool's before anything runs.
	// A tool without one is not checked.
	ArgSchemas map[string]json.RawMessage
}

// Validate checks a DAG and returns every problem: its structure (ids,
// dependencies, cycles: schemas.DAG.Shape, which every reader of a DAG shares),
// unknown agents or tools, a node with both or neither of tool and prompt,
// tool arguments that break the tool's JSON Schema, a bad policy, and a
// declared execution order that does not match the dependencies. nil means
// valid.
func Validate(dag *schemas.DAG, order [][]string, cat Catalog) error {
	var probs Problems
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if dag.ID != "" && !schemas.ValidName(dag.ID) {
		add("DAG id %q: use 1-64 of A-Z a-z 0-9 _ -", dag.ID)
	}
	if dag.Policy.MaxConcurrency < 0 {
		add("policy.max_concurrency %d: must be 0 (default) or more", dag.Policy.MaxConcurrency)
	}
	if dag.Policy.Retry.Max < 0 {
		add("policy.retry.max %d: must not be negative", dag.Policy.Retry.Max)
	}
	_, shape := dag.Shape()
	probs = append(probs, shape...)
	args := newArgChecker(cat.ArgSchemas)
	for i, n := range dag.Nodes {
		where := schemas.NodeLabel(i, n.ID)
		if validateNode(where, n, cat, add) {
			probs = append(probs, args.check(where, n.Tool, n.Args)...)
		}
	}
	if len(shape) == 0 && order != nil {
		validateOrder(dag, order, add)
	}
	if len(probs) > 0 {
		return probs
	}
	return nil
}

// validateNode reports n's problems and whether it is a tool node whose
// arguments are worth checking (its tool is known and allowed).
func validateNode(where string, n schemas.Node, cat Catalog, add func(string, ...any)) (checkArgs bool) {
	switch {
	case n.Tool != "" && n.Prompt != "":
		add("%s: has both tool and prompt; a node is one or the other", where)
	case n.Tool == "" && n.Prompt == "":
		add("%s: needs a tool (with args) or a prompt", where)
	case n.Prompt != "" && len(n.Args) > 0:
		add("%s: args go with a tool, not a prompt", where)
	case n.Tool != "" && len(n.Skills) > 0:
		add("%s: skills go with a prompt, not a tool", where)
	}
	if n.Agent == "" {
		add("%s: agent is missing (one of: %s)", where, strings.Join(cat.ToolAgents, ", "))
		return false
	}
	if n.Tool != "" {
		if !slices.Contains(cat.ToolAgents, n.Agent) {
			add("%s: agent %q does not run tool nodes (use one of: %s)", where, n.Agent, strings.Join(cat.ToolAgents, ", "))
		} else if !slices.Contains(cat.Tools, n.Tool) {
			add("%s: unknown tool %q (known: %s)", where, n.Tool, strings.Join(cat.Tools, ", "))
		} else if cat.Allowed != nil && !cat.Allowed(n.Agent, n.Tool) {
			add("%s: agent %q is not allowed to use tool %q", where, n.Agent, n.Tool)
		} else {
			checkArgs = n.Prompt == ""
		}
	}
	if n.Prompt != "" && !slices.Contains(cat.PromptAgents, n.Agent) {
		add("%s: agent %q does not run prompt nodes (use one of: %s)", where, n.Agent, strings.Join(cat.PromptAgents, ", "))
	}
	if n.Pipeline != "" {
		validatePipeline(where, n, add)
	}
	if n.Timeout < 0 {
		add("%s: timeout must not be negative", where)
	}
	if n.Retry != nil && n.Retry.Max < 0 {
		add("%s: retry.max must not be negative", where)
	}
	return checkArgs
}

// validatePipeline checks a node's pipeline: a known mode, on a prompt node
// of the Engineer (a pipeline has one worker, with its own Inspector and
// Tester).
func validatePipeline(where string, n schemas.Node, add func(string, ...any)) {
	modes := schemas.PipelineModes()
	switch {
	case !slices.Contains(modes, n.Pipeline):
		add("%s: unknown pipeline %q (known: %s)", where, n.Pipeline, strings.Join(modes, ", "))
	case n.Prompt == "":
		add("%s: pipeline %q needs a prompt node; a tool node runs as written", where, n.Pipeline)
	case n.Agent != "" && n.Agent != "engineer":
		add("%s: pipeline %q is worked by the engineer, not %q (its inspector and tester come with it)", where, n.Pipeline, n.Agent)
	}
}

// Layers groups the nodes of a sound DAG by depth: layer 0 has no
// dependencies, layer k nodes whose deepest dependency is in layer k-1.
func Layers(dag *schemas.DAG) [][]string {
	layers, _ := dag.Shape()
	return layers
}

// validateOrder checks a declared execution order: every node exactly once, no
// unknown ids, and each node after all its dependencies.
func validateOrder(dag *schemas.DAG, order [][]string, add func(string, ...any)) {
	layerOf := map[string]int{}
	for li, layer := range order {
		for _, id := range layer {
			if _, dup := layerOf[id]; dup {
				add("execution_order: %q appears more than once", id)
			}
			layerOf[id] = li
		}
	}
	known := map[string]bool{}
	for _, n := range dag.Nodes {
		known[n.ID] = true
		li, ok := layerOf[n.ID]
		if !ok {
			add("execution_order: node %q is missing", n.ID)
			continue
		}
		for _, dep := range n.DependsOn {
			if dl, ok := layerOf[dep]; ok && dl >= li {
				add("execution_order: %q is in layer %d but depends on %q in layer %d", n.ID, li+1, dep, dl+1)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(layerOf)) {
		if !known[id] {
			add("execution_order: %q is not a node", id)
		}
	}
}
