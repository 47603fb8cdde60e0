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
	"errors"
	"fmt"
	"reflect"
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

// file is the plan's YAML shape; durations are strings ("2s", "5m"). A
// want tag says what a value of the wrong type should have been, where the
// type alone does not.
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
	Backoff string `yaml:"backoff" want:"a duration like 2s"`
}

type node struct {
	ID        string         `yaml:"id"`
	Agent     string         `yaml:"agent"`
	Tool      string         `yaml:"tool"`
	Args      map[string]any `yaml:"args"`
	Prompt    string         `yaml:"prompt"`
	Skills    []string       `yaml:"skills"`
	DependsOn []string       `yaml:"depends_on"`
	Timeout   string         `yaml:"timeout" want:"a duration like 5m"`
	Retry     *retry         `yaml:"retry"`
	Pipeline  string         `yaml:"pipeline"`
}

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
	p, probs := parse(src)
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
}

// parse reads what it can of a plan file: with problems, the plan holds every
// value that could be read (nil only when the YAML itself does not parse), so
// Load can check the DAG as well.
func parse(src []byte) (*Plan, Problems) {
	var raw map[string]any
	if err := yaml.Unmarshal(src, &raw); err != nil {
		return nil, Problems{yaml.FormatError(err, false, true)}
	}
	if raw == nil {
		return nil, Problems{"the plan is empty: it needs nodes"}
	}
	var f file
	d := &decoder{}
	d.mapping(where{}, raw, reflect.ValueOf(&f).Elem())
	probs := d.probs
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
	return &Plan{DAG: dag, ExecutionOrder: f.ExecutionOrder}, probs
}

// Load parses a plan file and validates its DAG, reporting the problems of
// both at once: a typo in a key or a value of the wrong type does not hide a
// cycle or a tool argument the tool does not take.
func Load(src []byte, cat Catalog) (*Plan, error) {
	p, probs := parse(src)
	if p == nil {
		return nil, probs
	}
	if verr := Validate(&p.DAG, p.ExecutionOrder, cat); verr != nil {
		probs = append(probs, verr.(Problems)...)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
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
