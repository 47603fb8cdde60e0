package plan

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sylk/sylk/schemas"
)

// argChecker checks tool nodes' arguments against their tools' JSON Schemas,
// each schema compiled once per Validate.
type argChecker struct {
	docs     map[string]json.RawMessage
	compiled map[string]*jsonschema.Schema
}

func newArgChecker(docs map[string]json.RawMessage) *argChecker {
	return &argChecker{docs: docs, compiled: map[string]*jsonschema.Schema{}}
}

// check returns a problem for each way args break tool's schema, naming the
// argument ("args.argv: ...").
func (c *argChecker) check(where, tool string, args map[string]any) []string {
	doc, ok := c.docs[tool]
	if !ok {
		return nil
	}
	s, ok := c.compiled[tool]
	if !ok {
		var err error
		if s, err = compileSchema(tool, doc); err != nil {
			return []string{fmt.Sprintf("%s: the schema of tool %q does not compile: %v", where, tool, err)}
		}
		c.compiled[tool] = s
	}
	if args == nil {
		args = map[string]any{}
	}
	// The plan's decoder gives YAML's numbers; the validator wants JSON's.
	raw, err := json.Marshal(args)
	if err != nil {
		return []string{fmt.Sprintf("%s: args: %v", where, err)}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []string{fmt.Sprintf("%s: args: %v", where, err)}
	}
	var out []string
	for _, p := range schemas.SchemaProblems(s.Validate(inst), "args") {
		out = append(out, fmt.Sprintf("%s: %s (tool %q)", where, p, tool))
	}
	return out
}

func compileSchema(tool string, doc json.RawMessage) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "mem://tools/" + tool + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	return c.Compile(url)
}
