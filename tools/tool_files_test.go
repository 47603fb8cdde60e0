package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func decodeData[T any](t *testing.T, r Result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	return v
}

func TestReadFile(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.Files.ReadLines = 3 })
	dir := e.WorkDir()
	writeFile(t, filepath.Join(dir, "five.txt"), "one\ntwo\nthree\nfour\nfive")
	writeFile(t, filepath.Join(dir, "empty.txt"), "")
	writeFile(t, filepath.Join(dir, "bin.dat"), "abc\x00def")

	r := mustRun(t, e, "librarian", ToolReadFile, map[string]any{"path": "five.txt"})
	d := decodeData[readData](t, r)
	if !r.OK || r.Output != "one\ntwo\nthree\n" || !r.Truncated || d.NextStartLine != 4 || d.TotalLines != 5 {
		t.Fatalf("default window: %+v %+v", r, d)
	}
	if !strings.Contains(r.Summary, "start_line 4") {
		t.Errorf("summary does not say how to continue: %q", r.Summary)
	}
	r = mustRun(t, e, "librarian", ToolReadFile, map[string]any{"path": "five.txt", "start_line": 4, "max_lines": 10})
	if !r.OK || r.Output != "four\nfive" || r.Truncated {
		t.Fatalf("last window: %+v", r)
	}
	r = mustRun(t, e, "librarian", ToolReadFile, map[string]any{"path": "empty.txt"})
	if !r.OK || r.Output != "" {
		t.Fatalf("empty: %+v", r)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "five.txt", "start_line": 9}, "past the end"},
		{map[string]any{"path": "missing.txt"}, "no such file"},
		{map[string]any{"path": "bin.dat"}, "binary"},
		{map[string]any{"path": "."}, "is a directory"},
	} {
		r := mustRun(t, e, "librarian", ToolReadFile, tc.args)
		if r.OK || !strings.Contains(r.Error, tc.want) {
			t.Errorf("%v: OK=%v Error=%q, want %q", tc.args, r.OK, r.Error, tc.want)
		}
	}
}

func TestReadFileByteBudget(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.Files.MaxReadBytes = 1000 })
	var b strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "line %03d of the file\n", i)
	}
	writeFile(t, filepath.Join(e.WorkDir(), "f.txt"), b.String())
	writeFile(t, filepath.Join(e.WorkDir(), "long.txt"), strings.Repeat("abc ", 1000))
	r := mustRun(t, e, "engineer", ToolReadFile, map[string]any{"path": "f.txt"})
	if !r.OK || !r.Truncated || len(r.Output) > 1000 || !strings.HasSuffix(r.Output, "\n") {
		t.Fatalf("budget: OK=%v Truncated=%v len=%d", r.OK, r.Truncated, len(r.Output))
	}
	r = mustRun(t, e, "engineer", ToolReadFile, map[string]any{"path": "long.txt"})
	if !r.OK || !r.Truncated || len(r.Output) > 1000 || len(r.Output) < 900 {
		t.Fatalf("one long line: OK=%v Truncated=%v len=%d", r.OK, r.Truncated, len(r.Output))
	}
}

func TestWriteFileAtomic(t *testing.T) {
	e := newTestExecutor(t, nil)
	dir := e.WorkDir()
	r := mustRun(t, e, "engineer", ToolWriteFile, map[string]any{"path": "a/b/new.txt", "content": "hello\n"})
	d := decodeData[writeData](t, r)
	if !r.OK || !d.Created || d.Bytes != 6 || d.Path != "a/b/new.txt" {
		t.Fatalf("create: %+v %+v", r, d)
	}
	p := filepath.Join(dir, "a", "b", "new.txt")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, e, "engineer", ToolWriteFile, map[string]any{"path": "a/b/new.txt", "content": ""})
	if d := decodeData[writeData](t, r); !r.OK || d.Created {
		t.Fatalf("replace: %+v", r)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after replace: %v %v", fi, err)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Join(dir, "a", "b"))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want 1", len(entries))
	}
	r = mustRun(t, e, "engineer", ToolWriteFile, map[string]any{"path": "x/y.txt", "content": "z", "create_dirs": false})
	if r.OK || !strings.Contains(r.Error, "no such file") {
		t.Fatalf("create_dirs false: %+v", r)
	}
	r = mustRun(t, e, "engineer", ToolWriteFile, map[string]any{"path": "a", "content": "z"})
	if r.OK || !strings.Contains(r.Error, "directory") {
		t.Fatalf("over a directory: %+v", r)
	}
	for _, args := range []map[string]any{
		{"path": "f.txt"},
		{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"},
		{"content": "x"},
	} {
		if _, err := run(t, e, "engineer", ToolWriteFile, args); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("%v: err = %v, want ErrInvalidArgs", args, err)
		}
	}
}

func TestEditFile(t *testing.T) {
	e := newTestExecutor(t, nil)
	p := filepath.Join(e.WorkDir(), "main.go")
	writeFile(t, p, "package main\n\nfunc main() {\n\tprintln(\"a\")\n\tprintln(\"a\")\n}\n")
	read := func() string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	r := mustRun(t, e, "engineer", ToolEditFile, map[string]any{"path": "main.go", "old_text": `println("a")`, "new_text": `println("b")`})
	if r.OK || !strings.Contains(r.Error, "occurs 2 times") || !strings.Contains(r.Error, "lines 4, 5") {
		t.Fatalf("ambiguous edit: %+v", r)
	}
	r = mustRun(t, e, "engineer", ToolEditFile, map[string]any{"path": "main.go", "old_text": "\tprintln(\"a\")\n}", "new_text": "\tprintln(\"z\")\n}"})
	if d := decodeData[editData](t, r); !r.OK || d.Replacements != 1 || d.Line != 5 {
		t.Fatalf("unique edit: %+v", r)
	}
	if got := read(); !strings.Contains(got, "println(\"a\")\n\tprintln(\"z\")") {
		t.Fatalf("content %q", got)
	}
	r = mustRun(t, e, "engineer", ToolEditFile, map[string]any{"path": "main.go", "old_text": "println", "new_text": "print", "replace_all": true})
	if d := decodeData[editData](t, r); !r.OK || d.Replacements != 2 || strings.Contains(read(), "println") {
		t.Fatalf("replace_all: %+v", r)
	}
	r = mustRun(t, e, "engineer", ToolEditFile, map[string]any{"path": "main.go", "old_text": "func main() {\n print", "new_text": "x"})
	if r.OK || !strings.Contains(r.Error, "not found") {
		t.Fatalf("missing text: %+v", r)
	}
	r = mustRun(t, e, "engineer", ToolEditFile, map[string]any{"path": "main.go", "old_text": "  package main  ", "new_text": "x"})
	if r.OK || !strings.Contains(r.Error, "whitespace") {
		t.Fatalf("whitespace hint missing: %+v", r)
	}
	r = mustRun(t, e, "engineer", ToolEditFile, map[string]any{"path": "main.go", "old_text": "key = " + DefaultRedaction, "new_text": "x"})
	if r.OK || !strings.Contains(r.Error, "secret") {
		t.Fatalf("redaction hint missing: %+v", r)
	}
	for _, args := range []map[string]any{
		{"path": "main.go", "old_text": "", "new_text": "x"},
		{"path": "main.go", "old_text": "a"},
		{"path": "main.go", "old_text": "a", "new_text": "a"},
		{"path": "main.go", "old": "a", "new": "b"},
	} {
		if _, err := run(t, e, "engineer", ToolEditFile, args); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("%v: err = %v, want ErrInvalidArgs", args, err)
		}
	}
}
