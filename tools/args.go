package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// decodeArgs decodes the JSON object raw into v (a pointer to the tool's
// argument struct), refusing unknown fields, wrong types and trailing data
// with an error that names the field and what was expected. Empty or null
// arguments are an empty object.
func decodeArgs(tool string, fields []string, raw json.RawMessage, v any) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	if t[0] != '{' {
		return fmt.Errorf("%w: %s: arguments must be a JSON object, got %s", ErrInvalidArgs, tool, jsonKind(t))
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalidArgs, tool, describeDecodeError(err, fields))
	}
	if dec.More() {
		return fmt.Errorf("%w: %s: unexpected data after the arguments object", ErrInvalidArgs, tool)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("%w: %s: unexpected data after the arguments object", ErrInvalidArgs, tool)
	}
	return nil
}

func describeDecodeError(err error, fields []string) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("arguments are not valid JSON (at byte %d): %v", syn.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "arguments"
		}
		return fmt.Sprintf("field %q: expected %s, got %s", field, goTypeToJSON(typ.Type), article(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Sprintf("unknown field %s (fields: %s)", name, strings.Join(fields, ", "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "arguments are truncated JSON"
	}
	return fmt.Sprintf("cannot decode arguments: %v", err)
}

func goTypeToJSON(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(goTypeToJSON(t.Elem()), "a "), "an ") + "s"
	case reflect.Map:
		return "an object of " + strings.TrimPrefix(strings.TrimPrefix(goTypeToJSON(t.Elem()), "a "), "an ") + "s"
	case reflect.Pointer:
		return goTypeToJSON(t.Elem())
	}
	return "an object"
}

func article(jsonValue string) string {
	switch {
	case strings.HasPrefix(jsonValue, "number"):
		return "a number"
	case jsonValue == "array", jsonValue == "object":
		return "an " + jsonValue
	case jsonValue == "bool":
		return "a boolean"
	}
	return "a " + jsonValue
}

func jsonKind(t []byte) string {
	switch t[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number or invalid JSON"
}

// Schema construction helpers: JSON Schema (draft 2020-12) as Go maps.
type schema = map[string]any

func object(props schema, required ...string) schema {
	s := schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) schema { return schema{"type": "string", "description": desc} }

func nonEmptyStr(desc string) schema {
	return schema{"type": "string", "minLength": 1, "description": desc}
}

func boolean(desc string) schema { return schema{"type": "boolean", "description": desc} }

func integer(desc string, minimum, maximum int) schema {
	return schema{"type": "integer", "minimum": minimum, "maximum": maximum, "description": desc}
}

func strArray(desc string, minItems int) schema {
	s := schema{"type": "array", "items": schema{"type": "string"}, "description": desc}
	if minItems > 0 {
		s["minItems"] = minItems
	}
	return s
}

// propertyNames returns the sorted property names of an object schema.
func propertyNames(s schema) []string {
	props, _ := s["properties"].(schema)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// optInt returns *v, or def when the argument was not given, refusing
// values outside [lo, hi].
func optInt(tool, field string, v *int, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, fmt.Errorf("%w: %s: %s must be between %d and %d, got %d", ErrInvalidArgs, tool, field, lo, hi, *v)
	}
	return *v, nil
}
