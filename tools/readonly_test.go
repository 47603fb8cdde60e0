package tools

import (
	"encoding/json"
	"testing"
)

func TestReadOnlyCall(t *testing.T) {
	e, err := NewExecutor(Options{WorkDir: t.TempDir(), Permissions: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args any
		ro   bool
	}{
		{ToolReadFile, map[string]any{"path": "x"}, true},
		{ToolGrep, map[string]any{"pattern": "x"}, true},
		{ToolWriteFile, map[string]any{"path": "x", "content": "y"}, false},
		{ToolEditFile, map[string]any{"path": "x"}, false},
		{ToolGitCommit, map[string]any{"message": "m"}, false},
		{ToolExec, map[string]any{"argv": []string{"ls", "-la"}}, true},
		{ToolExec, map[string]any{"argv": []string{"/usr/bin/git", "log", "-3"}}, true},
		{ToolExec, map[string]any{"argv": []string{"git", "commit", "-m", "x"}}, false},
		{ToolExec, map[string]any{"argv": []string{"go", "vet", "./..."}}, true},
		{ToolExec, map[string]any{"argv": []string{"go", "generate"}}, false},
		{ToolExec, map[string]any{"argv": []string{"git"}}, false},
		{ToolExec, map[string]any{"argv": []string{"rm", "-rf", "."}}, false},
		{ToolExec, map[string]any{"argv": []string{"find", ".", "-name", "*.go"}}, true},
		{ToolExec, map[string]any{"argv": []string{"find", ".", "-delete"}}, false},
		{ToolExec, map[string]any{"command": "ls", "shell": true}, false},
		{"nope", map[string]any{}, false},
	} {
		raw, _ := json.Marshal(c.args)
		ro, why := e.ReadOnlyCall(Call{ID: "c1", Tool: c.tool, Args: raw})
		if ro != c.ro || (!ro && why == "") {
			t.Errorf("%s %s: read-only %v (%q), want %v", c.tool, raw, ro, why, c.ro)
		}
	}
}
