package schemas

import (
	"embed"
	"fmt"
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
