package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// escapeFixture builds, side by side in one temp dir:
//
//	proj/            the work directory
//	proj/inside.txt
//	proj/sub/
//	proj/link-in     -> sub (inside)
//	proj/link-out    -> ../outside (a directory outside)
//	proj/file-out    -> ../outside/secret.txt
//	proj/dangling    -> ../outside/new.txt (does not exist yet)
//	proj-evil/x.txt  a sibling whose name has the work dir as a prefix
//	outside/secret.txt
func escapeFixture(t *testing.T) (*Executor, string) {
	t.Helper()
	base := t.TempDir()
	proj := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(proj, "inside.txt"), "inside\n")
	writeFile(t, filepath.Join(proj, "sub", "a.txt"), "a\n")
	writeFile(t, filepath.Join(base, "outside", "secret.txt"), "outside secret\n")
	writeFile(t, filepath.Join(base, "proj-evil", "x.txt"), "evil\n")
	for link, target := range map[string]string{
		"link-in":  "sub",
		"link-out": "../outside",
		"file-out": "../outside/secret.txt",
		"dangling": "../outside/new.txt",
	} {
		if err := os.Symlink(target, filepath.Join(proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	e := newTestExecutor(t, func(o *Options) { o.WorkDir = proj })
	return e, base
}

func TestPathEscapesRefused(t *testing.T) {
	e, base := escapeFixture(t)
	escapes := []string{
		"..", "../outside/secret.txt", "sub/../../outside/secret.txt", "./../proj-evil/x.txt",
		filepath.Join(base, "outside", "secret.txt"), // absolute, outside
		filepath.Join(base, "proj-evil", "x.txt"),    // absolute, sibling sharing the prefix
		"/etc/passwd",
		"link-out/secret.txt", // through a symlinked directory
		"file-out",            // a symlinked file
		"link-out/new/deeper.txt",
	}
	for _, p := range escapes {
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{ToolReadFile, map[string]any{"path": p}},
			{ToolWriteFile, map[string]any{"path": p, "content": "pwned"}},
			{ToolEditFile, map[string]any{"path": p, "old_text": "outside", "new_text": "pwned"}},
			{ToolList, map[string]any{"path": p}},
			{ToolGrep, map[string]any{"pattern": "secret", "path": p}},
			{ToolExec, map[string]any{"argv": []string{"true"}, "dir": p}},
			{ToolGitDiff, map[string]any{"paths": []string{p}}},
		} {
			_, err := run(t, e, "engineer", tc.tool, tc.args)
			if !errors.Is(err, ErrPathEscape) || !errors.Is(err, ErrInvalidArgs) {
				t.Errorf("%s %q: err = %v, want ErrPathEscape (and ErrInvalidArgs)", tc.tool, p, err)
			}
		}
	}
	// A write through a dangling link would create a file outside.
	if _, err := run(t, e, "engineer", ToolWriteFile, map[string]any{"path": "dangling", "content": "pwned"}); !errors.Is(err, ErrPathEscape) {
		t.Errorf("write through a dangling symlink: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(base, "outside", "secret.txt"))
	if err != nil || string(b) != "outside secret\n" {
		t.Errorf("outside file changed: %q %v", b, err)
	}
	for _, p := range []string{filepath.Join(base, "outside", "new.txt"), filepath.Join(base, "outside", "new")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created outside the work directory", p)
		}
	}
	if _, err := run(t, e, "engineer", ToolReadFile, map[string]any{"path": "link-out/secret.txt"}); err == nil ||
		!strings.Contains(err.Error(), "outside the work directory") {
		t.Errorf("error does not explain the escape: %v", err)
	}
}

func TestPathsInsideAllowed(t *testing.T) {
	e, _ := escapeFixture(t)
	for _, p := range []string{
		"inside.txt", "./inside.txt", "sub/../inside.txt", "link-in/a.txt", "link-in/../inside.txt",
		filepath.Join(e.WorkDir(), "inside.txt"), // absolute, inside
	} {
		r := mustRun(t, e, "engineer", ToolReadFile, map[string]any{"path": p})
		if !r.OK || (r.Output != "inside\n" && r.Output != "a\n") {
			t.Errorf("read %q: OK=%v Output=%q Error=%q", p, r.OK, r.Output, r.Error)
		}
	}
	// Writes through a symlink inside land on its target.
	r := mustRun(t, e, "engineer", ToolWriteFile, map[string]any{"path": "link-in/new.txt", "content": "x"})
	if !r.OK {
		t.Fatalf("write through inner link: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(e.WorkDir(), "sub", "new.txt")); err != nil || string(b) != "x" {
		t.Fatalf("sub/new.txt: %q %v", b, err)
	}
}

func TestResolveDirect(t *testing.T) {
	e, _ := escapeFixture(t)
	rel, abs, err := e.root.resolve("path", "new/dir/file.txt")
	if err != nil || rel != filepath.Join("new", "dir", "file.txt") || abs != filepath.Join(e.WorkDir(), rel) {
		t.Fatalf("nonexistent path: %q %q %v", rel, abs, err)
	}
	if _, _, err := e.root.resolve("path", ""); !errors.Is(err, ErrInvalidArgs) {
		t.Fatalf("empty path: %v", err)
	}
	if _, _, err := e.root.resolve("path", "a\x00b"); !errors.Is(err, ErrInvalidArgs) {
		t.Fatalf("NUL: %v", err)
	}
	// A file named like ".." but longer is not an escape.
	writeFile(t, filepath.Join(e.WorkDir(), "..data"), "d")
	if rel, _, err := e.root.resolve("path", "..data"); err != nil || rel != "..data" {
		t.Fatalf("..data: %q %v", rel, err)
	}
	// A symlink loop is reported, not followed forever.
	if err := os.Symlink("loop", filepath.Join(e.WorkDir(), "loop")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.root.resolve("path", "loop"); err == nil {
		t.Fatal("symlink loop resolved")
	}
}
