package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileSchemas(t *testing.T, e *Executor) map[string]*jsonschema.Schema {
	t.Helper()
	out := map[string]*jsonschema.Schema{}
	c := jsonschema.NewCompiler()
	for _, spec := range e.Schemas() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Parameters))
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		url := "mem://" + spec.Name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		s, err := c.Compile(url)
		if err != nil {
			t.Fatalf("%s: schema does not compile: %v", spec.Name, err)
		}
		out[spec.Name] = s
	}
	return out
}

func TestSchemasDescribeEveryTool(t *testing.T) {
	e := newTestExecutor(t, nil)
	specs := e.Schemas()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		if len(s.Description) < 40 {
			t.Errorf("%s: description too short: %q", s.Name, s.Description)
		}
		var doc map[string]any
		if err := json.Unmarshal(s.Parameters, &doc); err != nil || doc["type"] != "object" || doc["additionalProperties"] != false {
			t.Errorf("%s: parameters %s", s.Name, s.Parameters)
		}
	}
	want := slices.Clone(builtinNames)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("schemas for %v, want %v", names, want)
	}
	compileSchemas(t, e)
	for name, ro := range map[string]bool{ToolReadFile: true, ToolGrep: true, ToolGitDiff: true, ToolExec: false, ToolWriteFile: false, ToolGitCommit: false} {
		if e.tools[name].spec.ReadOnly != ro {
			t.Errorf("%s: ReadOnly = %v", name, !ro)
		}
	}
	if got := e.SchemasFor("librarian"); len(got) != 6 {
		t.Errorf("librarian is offered %d tools, want 6", len(got))
	}
	if got := e.SchemasFor("guide"); len(got) != 0 {
		t.Errorf("guide is offered %v", got)
	}
}

// The published schema and the decoder agree: what the schema rejects, Run
// refuses with ErrInvalidArgs naming the field; what the tool accepts, the
// schema accepts.
func TestSchemaAndDecoderAgree(t *testing.T) {
	e := newTestExecutor(t, nil)
	writeFile(t, filepath.Join(e.WorkDir(), "f.txt"), "hello\n")
	schemas := compileSchemas(t, e)
	valid := map[string][]string{
		ToolExec: {`{"argv":["true"]}`, `{"argv":["echo","a"],"dir":".","env":{"A":"1"},"timeout":5,"stdin":"x"}`,
			`{"command":"true","shell":true}`},
		ToolReadFile:  {`{"path":"f.txt"}`, `{"path":"f.txt","start_line":1,"max_lines":1}`},
		ToolWriteFile: {`{"path":"g.txt","content":""}`, `{"path":"h/i.txt","content":"x","create_dirs":true}`},
		ToolEditFile:  {`{"path":"f.txt","old_text":"hello","new_text":"bye"}`, `{"path":"f.txt","old_text":"bye","new_text":"","replace_all":true}`},
		ToolList:      {`{}`, `{"path":".","depth":2,"max_entries":10}`},
		ToolGlob:      {`{"pattern":"*.txt"}`, `{"pattern":"**/*","path":".","max_entries":5}`},
		ToolGrep:      {`{"pattern":"h"}`, `{"pattern":"h","path":".","glob":"*.txt","ignore_case":true,"literal":true,"max_matches":3}`},
		ToolGitStatus: {`{}`},
		ToolGitDiff:   {`{}`, `{"staged":true,"ref":"HEAD","paths":["f.txt"],"stat":true}`},
		ToolGitCommit: {`{"message":"m"}`, `{"message":"m","paths":["f.txt"]}`, `{"message":"m","all":true}`},
	}
	invalid := map[string][]struct{ args, field string }{
		ToolExec: {
			{`{"argv":"true"}`, "argv"}, {`{"argv":[1]}`, "argv"}, {`{"argv":[]}`, "argv"},
			{`{"argv":["true"],"timeout":"5"}`, "timeout"}, {`{"argv":["true"],"timeout":-1}`, "timeout"},
			{`{"argv":["true"],"timeout":1e9}`, "timeout"}, {`{"argv":["true"],"shell":"yes"}`, "shell"},
			{`{"argv":["true"],"env":{"A":1}}`, "env"}, {`{"argv":["true"],"cwd":"."}`, "cwd"},
			{`{"command":""}`, "argv"},
		},
		ToolReadFile: {
			{`{}`, "path"}, {`{"path":3}`, "path"}, {`{"path":"f.txt","start_line":1.5}`, "start_line"},
			{`{"path":"f.txt","max_lines":0}`, "max_lines"}, {`{"file":"f.txt"}`, "file"}, {`[]`, "object"}, {`"f.txt"`, "object"},
		},
		ToolWriteFile: {{`{"path":"g.txt"}`, "content"}, {`{"content":"x"}`, "path"}, {`{"path":"g.txt","content":5}`, "content"}},
		ToolEditFile:  {{`{"path":"f.txt","old_text":"","new_text":"x"}`, "old_text"}, {`{"path":"f.txt","old_text":"a"}`, "new_text"}},
		ToolList:      {{`{"depth":0}`, "depth"}, {`{"depth":"2"}`, "depth"}, {`{"recursive":true}`, "recursive"}},
		ToolGlob:      {{`{}`, "pattern"}, {`{"pattern":""}`, "pattern"}, {`{"pattern":["*"]}`, "pattern"}},
		ToolGrep:      {{`{}`, "pattern"}, {`{"pattern":"x","ignore_case":1}`, "ignore_case"}, {`{"pattern":"x","max_matches":0}`, "max_matches"}},
		ToolGitStatus: {{`{"short":true}`, "short"}},
		ToolGitDiff:   {{`{"paths":"f.txt"}`, "paths"}, {`{"staged":"true"}`, "staged"}},
		ToolGitCommit: {{`{}`, "message"}, {`{"message":""}`, "message"}, {`{"message":"m","paths":[1]}`, "paths"}},
	}
	for tool, cases := range valid {
		for _, args := range cases {
			if err := schemas[tool].Validate(mustJSON(t, args)); err != nil {
				t.Errorf("%s %s: schema rejects valid args: %v", tool, args, err)
			}
			if _, err := run(t, e, "engineer", tool, args); errors.Is(err, ErrInvalidArgs) {
				t.Errorf("%s %s: tool rejects valid args: %v", tool, args, err)
			}
		}
	}
	for tool, cases := range invalid {
		for _, c := range cases {
			if doc, err := jsonschema.UnmarshalJSON(strings.NewReader(c.args)); err == nil && schemas[tool].Validate(doc) == nil {
				t.Errorf("%s %s: schema accepts invalid args", tool, c.args)
			}
			_, err := run(t, e, "engineer", tool, c.args)
			if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%s %s: err = %v, want ErrInvalidArgs naming %q", tool, c.args, err, c.field)
			}
		}
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Rules beyond the schema, with messages that say what to do instead.
func TestExecArgumentRules(t *testing.T) {
	e := newTestExecutor(t, nil)
	for _, tc := range []struct{ args, says string }{
		{`{"command":"go test ./..."}`, `"shell": true`},
		{`{"argv":["true"],"command":"true"}`, "not both"},
		{`{"argv":["true"],"shell":true}`, "goes with"},
		{`{"argv":[""]}`, "empty"},
		{`{"argv":["a\u0000b"]}`, "NUL"},
		{`{"argv":["true"],"env":{"1BAD":"x"}}`, "valid variable name"},
		{`{"argv":["true"],"env":{"OPENAI_API_KEY":"x"}}`, "credential"},
		{`{"argv":["true"]} {"x":1}`, "unexpected data"},
		{`{"argv":["true"]`, "JSON"},
		{`{"argv":["true"],"timeout":4000}`, "cap"},
	} {
		_, err := run(t, e, "engineer", ToolExec, tc.args)
		if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want ErrInvalidArgs saying %q", tc.args, err, tc.says)
		}
	}
	r := mustRun(t, e, "engineer", ToolExec, `{"argv":["true"],"dir":"missing"}`)
	if r.OK || !strings.Contains(r.Error, "no such file") {
		t.Errorf("missing dir: %+v", r)
	}
}
