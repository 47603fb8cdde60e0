// Package plan reads workflow plan files and validates DAGs: the one validator
// the CLI runs before submitting, the Orchestrator runs before executing, and
// the Architect's output must pass.
//
// A plan is the DAG schema of seed L25498-25550 in YAML (JSON is accepted too):
//
//	name: build-and-test
//	policy: {max_concurrency: 4, fail_fast: true, retry: {max: 2, backoff: 2s}}
//	nodes:
//	  - id: build
//	    agent: engineer
//	    tool: exec
//	    args: {argv: [go, build, ./...]}
//	  - id: test
//	    agent: tester
//	    tool: exec
//	    args: {argv: [go, test, ./...]}
//	    depends_on: [build]
//	    timeout: 5m
//
// A node has tool + args (the direct tier: no LLM) or prompt (the agent tier).
// Unknown keys are errors that name the key and the node.
package plan

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/sylk/sylk/schemas"
)

// ErrInvalid is wrapped by every parse and validation failure.
var ErrInvalid = errors.New("invalid plan")

// Problems is every problem found in a plan; it wraps ErrInvalid.
type Problems []string

func (p Problems) Error() string {
	if len(p) == 1 {
		return "invalid plan: " + p[0]
	}
	return fmt.Sprintf("invalid plan: %d problems:\n  - %s", len(p), strings.Join(p, "\n  - "))
}

// Is makes Problems match ErrInvalid.
func (p Problems) Is(target error) bool { return target == ErrInvalid }

// file is the plan's YAML shape; durations are strings ("2s", "5m").
type file struct {
	ID             string     `yaml:"id"`
	Name           string     `yaml:"name"`
	Prompt         string     `yaml:"prompt"`
	Policy         policy     `yaml:"policy"`
	Nodes          []node     `yaml:"nodes"`
	ExecutionOrder [][]string `yaml:"execution_order"`
}

type policy struct {
	MaxConcurrency int   `yaml:"max_concurrency"`
	FailFast       bool  `yaml:"fail_fast"`
	Retry          retry `yaml:"retry"`
}

type retry struct {
	Max     int    `yaml:"max"`
	Backoff string `yaml:"backoff"`
}

type node struct {
	ID        string         `yaml:"id"`
	Agent     string         `yaml:"agent"`
	Tool      string         `yaml:"tool"`
	Args      map[string]any `yaml:"args"`
	Prompt    string         `yaml:"prompt"`
	Skills    []string       `yaml:"skills"`
	DependsOn []string       `yaml:"depends_on"`
	Timeout   string         `yaml:"timeout"`
	Retry     *retry         `yaml:"retry"`
	Pipeline  string         `yaml:"pipeline"`
}

var (
	topKeys    = []string{"id", "name", "prompt", "policy", "nodes", "execution_order"}
	policyKeys = []string{"max_concurrency", "fail_fast", "retry"}
	retryKeys  = []string{"max", "backoff"}
	nodeKeys   = []string{"id", "agent", "tool", "args", "prompt", "skills", "depends_on", "timeout", "retry", "pipeline"}
)

// Plan is a parsed plan: the DAG and the layers it declared, if any.
type Plan struct {
	DAG schemas.DAG
	// ExecutionOrder is the plan's own layering (optional); Validate checks it
	// against the dependencies.
	ExecutionOrder [][]string
}

// Parse reads a plan file. It reports unknown keys (naming the node), values of
// the wrong type and durations that do not parse, all at once. It does not
// check the DAG itself: see Validate.
func Parse(src []byte) (*Plan, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(src, &raw); err != nil {
		return nil, Problems{yaml.FormatError(err, false, true)}
	}
	if raw == nil {
		return nil, Problems{"the plan is empty: it needs nodes"}
	}
	probs := unknownKeys(raw)
	var f file
	if err := yaml.NewDecoder(bytes.NewReader(src)).Decode(&f); err != nil {
		probs = append(probs, yaml.FormatError(err, false, true))
		return nil, probs
	}
	dag := schemas.DAG{ID: f.ID, Name: f.Name, Prompt: f.Prompt, Policy: schemas.Policy{
		MaxConcurrency: f.Policy.MaxConcurrency, FailFast: f.Policy.FailFast,
		Retry: schemas.Retry{Max: f.Policy.Retry.Max},
	}}
	var err error
	if dag.Policy.Retry.Backoff, err = duration(f.Policy.Retry.Backoff); err != nil {
		probs = append(probs, fmt.Sprintf("policy.retry.backoff: %v", err))
	}
	for i, n := range f.Nodes {
		where := schemas.NodeLabel(i, n.ID)
		sn := schemas.Node{ID: n.ID, Agent: n.Agent, Tool: n.Tool, Args: n.Args, Prompt: n.Prompt, Skills: n.Skills, DependsOn: n.DependsOn, Pipeline: n.Pipeline}
		if sn.Timeout, err = duration(n.Timeout); err != nil {
			probs = append(probs, fmt.Sprintf("%s: timeout: %v", where, err))
		}
		if n.Retry != nil {
			sn.Retry = &schemas.Retry{Max: n.Retry.Max}
			if sn.Retry.Backoff, err = duration(n.Retry.Backoff); err != nil {
				probs = append(probs, fmt.Sprintf("%s: retry.backoff: %v", where, err))
			}
		}
		dag.Nodes = append(dag.Nodes, sn)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return &Plan{DAG: dag, ExecutionOrder: f.ExecutionOrder}, nil
}

// Load parses a plan file and validates its DAG, reporting the problems of
// both at once: a typo in a key does not hide a cycle.
func Load(src []byte, cat Catalog) (*Plan, error) {
	probs := unknownKeysOf(src)
	clean, err := withoutUnknownKeys(src)
	if err != nil {
		return nil, err
	}
	p, err := Parse(clean)
	if err != nil {
		return nil, append(probs, err.(Problems)...)
	}
	if verr := Validate(&p.DAG, p.ExecutionOrder, cat); verr != nil {
		probs = append(probs, verr.(Problems)...)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
}

func unknownKeysOf(src []byte) Problems {
	var raw map[string]any
	if yaml.Unmarshal(src, &raw) != nil {
		return nil
	}
	return unknownKeys(raw)
}

// withoutUnknownKeys re-encodes the plan with the keys the format does not
// have removed, so the rest can still be checked.
func withoutUnknownKeys(src []byte) ([]byte, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(src, &raw); err != nil {
		return nil, Problems{yaml.FormatError(err, false, true)}
	}
	if raw == nil {
		return src, nil
	}
	keep := func(m map[string]any, allowed []string) {
		for k := range m {
			if !slices.Contains(allowed, k) {
				delete(m, k)
			}
		}
	}
	keep(raw, topKeys)
	if p, ok := raw["policy"].(map[string]any); ok {
		keep(p, policyKeys)
		if r, ok := p["retry"].(map[string]any); ok {
			keep(r, retryKeys)
		}
	}
	if nodes, ok := raw["nodes"].([]any); ok {
		for _, n := range nodes {
			if m, ok := n.(map[string]any); ok {
				keep(m, nodeKeys)
				if r, ok := m["retry"].(map[string]any); ok {
					keep(r, retryKeys)
				}
			}
		}
	}
	return yaml.Marshal(raw)
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (like 30s, 5m, 1h30m)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// unknownKeys names every key the plan format does not have.
func unknownKeys(raw map[string]any) Problems {
	var probs Problems
	check := func(where string, m map[string]any, allowed []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(allowed, k) {
				probs = append(probs, fmt.Sprintf("%sunknown key %q (allowed: %s)", where, k, strings.Join(allowed, ", ")))
			}
		}
	}
	check("", raw, topKeys)
	if p, ok := raw["policy"].(map[string]any); ok {
		check("policy: ", p, policyKeys)
		if r, ok := p["retry"].(map[string]any); ok {
			check("policy.retry: ", r, retryKeys)
		}
	}
	if nodes, ok := raw["nodes"].([]any); ok {
		for i, n := range nodes {
			m, ok := n.(map[string]any)
			if !ok {
				probs = append(probs, fmt.Sprintf("node #%d is not a mapping of keys", i+1))
				continue
			}
			id, _ := m["id"].(string)
			check(schemas.NodeLabel(i, id)+": ", m, nodeKeys)
			if r, ok := m["retry"].(map[string]any); ok {
				check(schemas.NodeLabel(i, id)+": retry: ", r, retryKeys)
			}
		}
	}
	return probs
}
