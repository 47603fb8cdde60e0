package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The published JSON Schema documents, one per message type: the envelope with its
// type fixed and its payload described. They describe the msgpack map an event
// decodes to (timestamps as RFC 3339 strings, durations as integer nanoseconds).
// TestJSONSchemasMatchGoTypes regenerates them from the Go types and fails on any
// drift; run it with -update to rewrite them.
//
//go:embed jsonschema/*.json
var jsonSchemas embed.FS

// JSONSchemaDir is where the documents live, relative to this package.
const JSONSchemaDir = "jsonschema"

// JSONSchema returns the JSON Schema document of message type t.
func JSONSchema(t Type) ([]byte, error) {
	if !t.Known() {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, string(t))
	}
	return jsonSchemas.ReadFile(JSONSchemaDir + "/" + string(t) + ".json")
}

// payloadSchemas are the compiled payload parts of the published documents,
// by type.
var payloadSchemas sync.Map // Type -> *jsonschema.Schema

// DecodePayloadJSON reads a payload written as JSON by someone outside the
// code (a hook program): it must satisfy the payload part of t's published
// JSON Schema (required fields, types) and decode strictly into t's payload
// type (no unknown field). The error names each field at fault.
func DecodePayloadJSON(t Type, raw []byte) (any, error) {
	s, err := payloadSchema(t)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("payload is not JSON: %w", err)
	}
	if probs := SchemaProblems(s.Validate(inst), "payload"); len(probs) > 0 {
		return nil, fmt.Errorf("%s (see 'sylk schema %s')", strings.Join(probs, "; "), t)
	}
	p, err := NewPayload(t)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("payload: %w (see 'sylk schema %s')", err, t)
	}
	return p, nil
}

// SchemaProblems lists what a JSON Schema validation error (of
// santhosh-tekuri/jsonschema) found, one problem per leaf, each
// "ROOT.path.to.field: what is wrong"; nil for a nil error or another one.
func SchemaProblems(err error, root string) []string {
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok || verr == nil {
		return nil
	}
	var out []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			out = append(out, root+strings.ReplaceAll(u.InstanceLocation, "/", ".")+": "+u.Error.String())
		}
		for _, e := range u.Errors {
			walk(e)
		}
	}
	walk(*verr.BasicOutput())
	return out
}

func payloadSchema(t Type) (*jsonschema.Schema, error) {
	if s, ok := payloadSchemas.Load(t); ok {
		return s.(*jsonschema.Schema), nil
	}
	doc, err := JSONSchema(t)
	if err != nil {
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "mem://schemas/" + string(t) + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(url + "#/properties/payload")
	if err != nil {
		return nil, fmt.Errorf("the published schema of %s does not compile: %w", t, err)
	}
	payloadSchemas.Store(t, s)
	return s, nil
}
