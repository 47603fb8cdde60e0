package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func searchFixture(t *testing.T) *Executor {
	t.Helper()
	e := newTestExecutor(t, nil)
	dir := e.WorkDir()
	for p, content := range map[string]string{
		"go.mod":                     "module example\n",
		"main.go":                    "package main\n\n// TODO: flags\nfunc main() {}\n",
		"cmd/tool/main.go":           "package main\n\nfunc main() { run() } // TODO\n",
		"internal/x/x.go":            "package x\n",
		"internal/x/x_test.go":       "package x\n// todo lower\n",
		"docs/readme.md":             "TODO: write docs\n",
		".git/config":                "TODO inside git\n",
		"assets/logo.bin":            "TODO\x00binary",
		"internal/x/testdata/a.json": "{}\n",
	} {
		writeFile(t, filepath.Join(dir, p), content)
	}
	if err := os.Symlink("internal", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	return e
}

func outputLines(r Result) []string {
	return strings.Split(strings.TrimSuffix(r.Output, "\n"), "\n")
}

func TestList(t *testing.T) {
	e := searchFixture(t)
	r := mustRun(t, e, "librarian", ToolList, map[string]any{})
	want := "alias -> internal\nassets/\ncmd/\ndocs/\ngo.mod\ninternal/\nmain.go\n"
	if !r.OK || r.Output != want {
		t.Fatalf("list .:\n%s\nwant:\n%s", r.Output, want)
	}
	d := decodeData[listData](t, r)
	if d.Entries[4].Type != "file" || d.Entries[4].Size != int64(len("module example\n")) || d.Entries[0].Type != "symlink" {
		t.Fatalf("entries %+v", d.Entries)
	}
	r = mustRun(t, e, "librarian", ToolList, map[string]any{"path": "internal", "depth": 5})
	want = "internal/x/\ninternal/x/testdata/\ninternal/x/testdata/a.json\ninternal/x/x.go\ninternal/x/x_test.go\n"
	if r.Output != want {
		t.Fatalf("list internal depth 5:\n%s", r.Output)
	}
	r = mustRun(t, e, "librarian", ToolList, map[string]any{"depth": 10, "max_entries": 3})
	if !r.Truncated || len(outputLines(r)) != 3 {
		t.Fatalf("max_entries: %+v", r)
	}
	r = mustRun(t, e, "librarian", ToolList, map[string]any{"path": "nope"})
	if r.OK || !strings.Contains(r.Error, "no such file") {
		t.Fatalf("missing dir: %+v", r)
	}
	if _, err := run(t, e, "librarian", ToolList, map[string]any{"depth": 99}); !errors.Is(err, ErrInvalidArgs) {
		t.Fatalf("depth 99: %v", err)
	}
}

func TestGlob(t *testing.T) {
	e := searchFixture(t)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"pattern": "**/*.go"}, "cmd/tool/main.go\ninternal/x/x.go\ninternal/x/x_test.go\nmain.go\n"},
		{map[string]any{"pattern": "*.go"}, "main.go\n"},
		{map[string]any{"pattern": "**/*_test.go", "path": "internal"}, "internal/x/x_test.go\n"},
		{map[string]any{"pattern": "cmd/*/main.go"}, "cmd/tool/main.go\n"},
		{map[string]any{"pattern": "internal/**"}, "internal/\ninternal/x/\ninternal/x/testdata/\ninternal/x/testdata/a.json\ninternal/x/x.go\ninternal/x/x_test.go\n"},
		{map[string]any{"pattern": "**/config"}, ""},
	} {
		r := mustRun(t, e, "librarian", ToolGlob, tc.args)
		if !r.OK || r.Output != tc.want {
			t.Errorf("glob %v:\n%s\nwant:\n%s", tc.args, r.Output, tc.want)
		}
	}
	for _, pat := range []string{"", "/etc/*", "../*", "[", "**/**/**/**/**/x"} {
		if _, err := run(t, e, "librarian", ToolGlob, map[string]any{"pattern": pat}); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("pattern %q: err = %v, want ErrInvalidArgs", pat, err)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"**", "a/b/c", true},
		{"**/c", "c", true},
		{"a/**/c", "a/c", true},
		{"a/**/c", "a/x/y/c", true},
		{"a/**/c", "a/x/y/d", false},
		{"*.go", "a/b.go", false},
		{"a/*.go", "a/b.go", true},
		{"a/?.go", "a/bb.go", false},
	} {
		if got := matchGlob(tc.pat, tc.name); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v", tc.pat, tc.name, got)
		}
	}
}

func TestGrep(t *testing.T) {
	e := searchFixture(t)
	r := mustRun(t, e, "librarian", ToolGrep, map[string]any{"pattern": "TODO"})
	want := "cmd/tool/main.go:3: func main() { run() } // TODO\ndocs/readme.md:1: TODO: write docs\nmain.go:3: // TODO: flags\n"
	if !r.OK || r.Output != want {
		t.Fatalf("grep TODO:\n%s\nwant:\n%s", r.Output, want)
	}
	d := decodeData[grepData](t, r)
	if d.FilesSkipped != 1 || d.Matches[2].Line != 3 || d.Matches[2].Path != "main.go" {
		t.Fatalf("data %+v", d)
	}
	for _, tc := range []struct {
		args map[string]any
		n    int
	}{
		{map[string]any{"pattern": "todo", "ignore_case": true}, 4},
		{map[string]any{"pattern": "todo", "ignore_case": true, "glob": "*.go"}, 3},
		{map[string]any{"pattern": "todo", "ignore_case": true, "glob": "internal/**/*_test.go"}, 1},
		{map[string]any{"pattern": "run()", "literal": true}, 1},
		{map[string]any{"pattern": "package", "path": "internal/x/x.go"}, 1},
		{map[string]any{"pattern": "package", "max_matches": 2}, 2},
	} {
		r := mustRun(t, e, "librarian", ToolGrep, tc.args)
		if n := len(decodeData[grepData](t, r).Matches); !r.OK || n != tc.n {
			t.Errorf("grep %v: %d matches, want %d:\n%s", tc.args, n, tc.n, r.Output)
		}
	}
	if _, err := run(t, e, "librarian", ToolGrep, map[string]any{"pattern": "a("}); !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), "literal") {
		t.Fatalf("bad regexp: %v", err)
	}
}
