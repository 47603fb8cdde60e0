package tools

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDefaultPolicyMatrix(t *testing.T) {
	p := DefaultPolicy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	readOnly := []string{ToolGitDiff, ToolGitStatus, ToolGlob, ToolGrep, ToolList, ToolReadFile}
	sorted := func(xs ...string) []string { xs = slices.Clone(xs); slices.Sort(xs); return xs }
	for agent, want := range map[string][]string{
		"engineer":     sorted(append(slices.Clone(readOnly), ToolExec, ToolWriteFile, ToolEditFile, ToolGitCommit)...),
		"tester":       sorted(append(slices.Clone(readOnly), ToolExec, ToolWriteFile, ToolEditFile)...),
		"inspector":    sorted(append(slices.Clone(readOnly), ToolExec)...),
		"librarian":    sorted(readOnly...),
		"architect":    sorted(readOnly...),
		"orchestrator": nil,
		"guide":        nil,
		"archivalist":  nil,
		"academic":     nil,
		"designer":     nil, // not configured: denied
		"":             nil,
	} {
		if got := p.AllowedTools(agent); !slices.Equal(got, want) {
			t.Errorf("%q may call %v, want %v", agent, got, want)
		}
	}
}

// Unknown tools are never reads, groups never grow, typos fail validation.
func TestPolicyHoles(t *testing.T) {
	p := Policy{Agents: map[string]AgentPolicy{"a": {Tools: []string{GroupRead}}}}
	for _, tool := range []string{"git_push", "git_reset", "git_log", "read_anything", "", "READ_FILE"} {
		if p.Allows("a", tool) {
			t.Errorf("@read allows %q", tool)
		}
	}
	for _, bad := range []Policy{
		{Agents: map[string]AgentPolicy{"a": {Tools: []string{"git_comit"}}}},
		{Agents: map[string]AgentPolicy{"a": {Tools: []string{"@all"}}}},
		{Agents: map[string]AgentPolicy{"a": {Tools: []string{"*"}}}},
		{Agents: map[string]AgentPolicy{"a": {Tools: []string{ToolExec}, Commands: []string{"  "}}}},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Validate = %v", bad, err)
		}
	}
	if (Policy{}).Allows("engineer", ToolReadFile) {
		t.Error("the zero Policy allows something")
	}
}

func TestPolicyJSONRoundTrip(t *testing.T) {
	in := `{"agents":{"inspector":{"tools":["exec","@read"],"commands":["go vet","gofmt"]},"librarian":{"tools":["@read"]}}}`
	var p Policy
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if !p.Allows("inspector", ToolGrep) || p.Allows("librarian", ToolExec) {
		t.Fatalf("decoded policy: %+v", p)
	}
	out, err := json.Marshal(p)
	if err != nil || string(out) != in {
		t.Fatalf("round trip: %s %v", out, err)
	}
}

// An agent limited to command prefixes runs only those, and never a shell.
func TestPolicyCommands(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) {
		o.Permissions.Agents["inspector"] = AgentPolicy{Tools: []string{ToolExec, GroupRead}, Commands: []string{"echo hello", "true"}}
	})
	for _, argv := range [][]string{{"echo", "hello"}, {"echo", "hello", "world"}, {"/bin/true"}, {"true", "x"}} {
		if _, err := run(t, e, "inspector", ToolExec, map[string]any{"argv": argv}); err != nil {
			t.Errorf("%v: %v", argv, err)
		}
	}
	for _, args := range []map[string]any{
		{"argv": []string{"echo", "bye"}},
		{"argv": []string{"echo"}},
		{"argv": []string{"rm", "-rf", "x"}},
		{"command": "true", "shell": true},
	} {
		_, err := run(t, e, "inspector", ToolExec, args)
		if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `"echo hello"`) {
			t.Errorf("%v: err = %v, want ErrPermissionDenied naming the allowed commands", args, err)
		}
	}
}

func TestRunRefusals(t *testing.T) {
	e := newTestExecutor(t, nil)
	ctx := t.Context()
	for _, tc := range []struct {
		agent string
		call  Call
		want  error
		says  string
	}{
		{"engineer", Call{ID: "", Tool: ToolList}, ErrInvalidCall, "call id"},
		{"engineer", Call{ID: "has space", Tool: ToolList}, ErrInvalidCall, "call id"},
		{"engineer", Call{ID: strings.Repeat("a", 65), Tool: ToolList}, ErrInvalidCall, "call id"},
		{"engineer", Call{ID: "c", Tool: "rm_rf"}, ErrUnknownTool, "read_file"},
		{"engineer", Call{ID: "c", Tool: ""}, ErrUnknownTool, "exec"},
		{"librarian", Call{ID: "c", Tool: ToolExec, Args: json.RawMessage(`{"argv":["true"]}`)}, ErrPermissionDenied, "grep"},
		{"guide", Call{ID: "c", Tool: ToolReadFile, Args: json.RawMessage(`{"path":"x"}`)}, ErrPermissionDenied, "no tools"},
		{"stranger", Call{ID: "c", Tool: ToolList}, ErrPermissionDenied, "stranger"},
	} {
		r, err := e.Run(ctx, tc.agent, tc.call)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s %+v: err = %v, want %v mentioning %q", tc.agent, tc.call, err, tc.want, tc.says)
		}
		if r.CallID != "" || r.OK {
			t.Errorf("refused call returned a result: %+v", r)
		}
		if !IsRefusal(err) {
			t.Errorf("IsRefusal(%v) = false", err)
		}
	}
}
