package cmdutil

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Where a configuration value came from, besides a config file's path.
const (
	SourceDefault = "default"
	SourceEnv     = "env"
	SourceFlag    = "flag"
)

// Origins maps a configuration key, dotted as in the config files
// (llm.budgets.session), to the layer that set it: a config file's path,
// SourceEnv or SourceFlag. A key it lacks has its default.
type Origins map[string]string

// mark attributes to source every key whose value in cfg differs from seen
// (the values before source's layer), and returns cfg's values.
func (o Origins) mark(seen map[string]any, cfg Config, source string) map[string]any {
	now := flatten(cfg)
	for _, k := range changedKeys(seen, now) {
		if _, set := now[k]; set {
			o[k] = source
		} else {
			delete(o, k) // a layer emptied it
		}
	}
	return now
}

// Setting is one effective configuration value and where it came from.
type Setting struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// secretKeys are shown masked.
var secretKeys = []string{"password", "token"}

// Settings lists cfg's values that are set, sorted by key, each with its
// origin (SourceDefault when origins has none); secrets are masked.
func (o Origins) Settings(cfg Config) []Setting {
	values := flatten(cfg)
	out := make([]Setting, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v := values[k]
		if slices.Contains(secretKeys, k) {
			v = "********"
		}
		src, ok := o[k]
		if !ok {
			src = SourceDefault
		}
		out = append(out, Setting{Key: k, Value: v, Source: src})
	}
	return out
}

// changedKeys are the keys whose values differ between a and b (set in one
// only, or to different values), sorted.
func changedKeys(a, b map[string]any) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// flatten maps each set (non-zero) value of cfg to its dotted key, named by
// the yaml tags: structs and string-keyed maps are walked, lists are values,
// durations are their text.
func flatten(cfg Config) map[string]any {
	out := map[string]any{}
	walk(reflect.ValueOf(cfg), "", out)
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

func walk(v reflect.Value, key string, out map[string]any) {
	join := func(name string) string {
		if key == "" {
			return name
		}
		return key + "." + name
	}
	switch {
	case v.IsZero():
		return
	case v.Type() == durationType:
		out[key] = time.Duration(v.Int()).String()
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "-" || !t.Field(i).IsExported() {
				continue
			}
			if name == "" {
				name = strings.ToLower(t.Field(i).Name)
			}
			walk(v.Field(i), join(name), out)
		}
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		for _, k := range v.MapKeys() {
			walk(v.MapIndex(k), join(k.String()), out)
		}
	default:
		out[key] = v.Interface()
	}
}
