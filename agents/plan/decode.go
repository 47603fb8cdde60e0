package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/sylk/sylk/schemas"
)

// decoder fills a plan's structs from its YAML, key by key, so that one value
// of the wrong type costs only that value: every unknown key and every wrong
// type is reported, and the rest of the plan is still read, to be checked
// whole (a typo does not hide a cycle).
type decoder struct{ probs Problems }

// where names a place in the plan for a problem: the node (its label, "" at
// the top) and the dotted path of keys inside it.
type where struct {
	node string
	path []string
}

func (w where) in(key string) where {
	return where{node: w.node, path: append(slices.Clip(w.path), key)}
}

func (w where) String() string {
	parts := []string{}
	if w.node != "" {
		parts = append(parts, w.node)
	}
	if len(w.path) > 0 {
		parts = append(parts, strings.Join(w.path, "."))
	}
	return strings.Join(parts, ": ")
}

func (d *decoder) add(w where, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s := w.String(); s != "" {
		msg = s + ": " + msg
	}
	d.probs = append(d.probs, msg)
}

// mapping decodes m into the struct dst points to. Keys the struct does not
// have are reported with the ones it has; a struct or a list of nodes is
// walked into; any other value is decoded alone and, when its type is wrong,
// reported and left at its zero value.
func (d *decoder) mapping(w where, m map[string]any, dst reflect.Value) {
	t := dst.Type()
	var keys []string
	fields := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		keys = append(keys, name)
		fields[name] = i
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if _, ok := fields[k]; !ok {
			d.add(w, "unknown key %q (allowed: %s)", k, strings.Join(keys, ", "))
		}
	}
	for _, k := range keys {
		v, ok := m[k]
		if !ok || v == nil {
			continue
		}
		d.value(w.in(k), v, dst.Field(fields[k]), t.Field(fields[k]).Tag.Get("want"))
	}
}

// value decodes v into dst, at w; want, if set, says what dst takes.
func (d *decoder) value(w where, v any, dst reflect.Value, want string) {
	t := dst.Type()
	switch {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		elem := reflect.New(t.Elem())
		if d.structValue(w, v, elem.Elem()) {
			dst.Set(elem)
		}
		return
	case t.Kind() == reflect.Struct:
		d.structValue(w, v, dst)
		return
	case t == reflect.TypeFor[[]node]():
		list, ok := v.([]any)
		if !ok {
			d.add(w, "got %s, want a list of nodes", yamlKind(v))
			return
		}
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				d.add(where{}, "node #%d is not a mapping of keys", i+1)
				continue
			}
			id, _ := m["id"].(string)
			var n node
			d.mapping(where{node: schemas.NodeLabel(i, id)}, m, reflect.ValueOf(&n).Elem())
			dst.Set(reflect.Append(dst, reflect.ValueOf(n)))
		}
		return
	}
	b, err := yaml.Marshal(v)
	if err == nil {
		err = yaml.Unmarshal(b, dst.Addr().Interface())
	}
	if err != nil {
		dst.SetZero()
		if want == "" {
			want = typeKind(t)
		}
		d.add(w, "got %s, want %s", yamlKind(v), want)
	}
}

// structValue decodes a mapping into the struct dst and reports whether v
// was one.
func (d *decoder) structValue(w where, v any, dst reflect.Value) bool {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(w, "got %s, want a mapping of keys", yamlKind(v))
		return false
	}
	d.mapping(w, m, dst)
	return true
}

// yamlKind names the kind of a decoded YAML value the way JSON Schema names
// types, as the tool arguments' problems do.
func yamlKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float32, float64:
		return "number"
	case int, int64, uint64, int32, uint32:
		return "integer"
	}
	return fmt.Sprintf("%T", v)
}

// typeKind names what a field of type t takes.
func typeKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Slice {
			return "array of arrays of " + typeKind(t.Elem().Elem())
		}
		return "array of " + typeKind(t.Elem())
	case reflect.Map:
		return "object"
	}
	return t.String()
}
