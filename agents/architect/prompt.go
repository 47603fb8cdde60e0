package architect

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Style is the communication style every Sylk agent's prompt starts with
// (seed L14558-14619).
const Style = `Be direct and concrete. No flattery, no filler, no hedging. State assumptions explicitly. ` +
	`Base claims on evidence (files, command output), and say when you do not know.`

func (a *Architect) systemPrompt() string {
	var b strings.Builder
	b.WriteString("You are the Architect of Sylk, a multi-agent runtime. You turn a request into a plan: ")
	b.WriteString("a DAG of nodes that Sylk's agents execute once the user approves it.\n")
	b.WriteString(Style + "\n\n")
	b.WriteString(`Answer with one JSON object and nothing else. Either a plan:
{"action": "plan", "rationale": "why this plan, in two or three sentences", "confidence": 0.85,
 "plan": {"name": "short name", "policy": {"max_concurrency": 2, "fail_fast": true, "retry": {"max": 1, "backoff": "2s"}},
          "nodes": [ ... ]}}
or, only when the request cannot be planned without the user (incompatible readings, a reference you cannot resolve,
no clear stopping point), one question:
{"action": "clarify", "question": "one specific question", "options": ["A: ...", "B: ..."]}

A node is a tool node or a prompt node:
- tool node, run as is without an LLM:
  {"id": "build", "agent": "engineer", "tool": "exec", "args": {"argv": ["go", "build", "./..."]}, "timeout": "5m"}
- prompt node, worked on by an agent with an LLM and the tools it may use:
  {"id": "validate", "agent": "engineer", "prompt": "what to do, precisely: which files, what behaviour, how to check it", "depends_on": ["..."]}
Rules:
- ids are 1-64 characters of A-Z a-z 0-9 _ -, unique; depends_on names other nodes; no cycles.
- a node has a tool (with args) or a prompt, never both; timeout is a duration like "90s" or "10m".
- the engineer changes code, the inspector reviews and checks (it cannot write), the tester writes and runs tests.
- prefer tool nodes for deterministic steps (build, vet, tests) and prompt nodes for work that needs judgement.
- an engineer prompt node that changes code names a pipeline, in which its own inspector and tester check it in a loop:
  "pipeline": "tdd" (criteria, failing tests first, then the code: new behaviour with a clear contract),
  "standard" (the code, a review, then tests) or "review" (the code and a review: docs, config, no behaviour to test).
- finish with verification: build and run the tests after the change.
`)
	cat := a.Catalog
	fmt.Fprintf(&b, "- agents of tool nodes: %s; agents of prompt nodes: %s.\n", strings.Join(cat.ToolAgents, ", "), strings.Join(cat.PromptAgents, ", "))
	if cat.Allowed != nil {
		for _, agent := range cat.ToolAgents {
			var allowed []string
			for _, t := range cat.Tools {
				if cat.Allowed(agent, t) {
					allowed = append(allowed, t)
				}
			}
			fmt.Fprintf(&b, "- %s may use: %s\n", agent, strings.Join(allowed, ", "))
		}
	}
	b.WriteString("\nTools (name: what it does; its args as JSON Schema):\n")
	for _, t := range a.Tools {
		if len(cat.Tools) > 0 && !slices.Contains(cat.Tools, t.Name) {
			continue
		}
		fmt.Fprintf(&b, "- %s: %s\n  args: %s\n", t.Name, t.Description, t.Parameters)
	}
	return b.String()
}

// prompt is the user message for a planning call.
func (j job) prompt(env *schemas.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Request: %s\n", j.request)
	if in := env.StructuredIntent; in != nil {
		if in.IntentType != "" {
			fmt.Fprintf(&b, "Kind of request: %s\n", in.IntentType)
		}
		if len(in.KeyConstraints) > 0 {
			fmt.Fprintf(&b, "Constraints the plan must respect:\n- %s\n", strings.Join(in.KeyConstraints, "\n- "))
		}
		if len(in.SuccessCriteria) > 0 {
			fmt.Fprintf(&b, "Done when:\n- %s\n", strings.Join(in.SuccessCriteria, "\n- "))
		}
	}
	if j.question != "" {
		fmt.Fprintf(&b, "\nThe user was asked: %s\nThey answered: %s\n", j.question, j.answer)
	}
	switch {
	case j.previousMode != nil:
		prev, _ := json.MarshalIndent(j.previousMode, "", "  ")
		fmt.Fprintf(&b, "\nYour previous plan:\n%s\nThe user wants it changed: %s\n", prev, j.feedback)
	case j.previous != nil:
		fmt.Fprintf(&b, "\nYour previous plan:\n%s\nThe user wants it changed: %s\n", planJSON(j.previous), j.feedback)
	}
	return b.String()
}

// planJSON writes a DAG in the plan-file shape the model answers in.
func planJSON(dag *schemas.DAG) string {
	type node struct {
		ID        string         `json:"id"`
		Agent     string         `json:"agent"`
		Tool      string         `json:"tool,omitempty"`
		Args      map[string]any `json:"args,omitempty"`
		Prompt    string         `json:"prompt,omitempty"`
		DependsOn []string       `json:"depends_on,omitempty"`
		Timeout   string         `json:"timeout,omitempty"`
		Pipeline  string         `json:"pipeline,omitempty"`
	}
	out := struct {
		Name  string `json:"name,omitempty"`
		Nodes []node `json:"nodes"`
	}{Name: dag.Name}
	for _, n := range dag.Nodes {
		x := node{ID: n.ID, Agent: n.Agent, Tool: n.Tool, Args: n.Args, Prompt: n.Prompt, DependsOn: n.DependsOn, Pipeline: n.Pipeline}
		if n.Timeout > 0 {
			x.Timeout = n.Timeout.String()
		}
		out.Nodes = append(out.Nodes, x)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return string(b)
}
