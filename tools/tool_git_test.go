//go:build unix

package tools

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gitRepo returns an executor whose work directory is a fresh repository
// with one commit.
func gitRepo(t *testing.T) *Executor {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required by these tests: %v", err)
	}
	e := newTestExecutor(t, nil)
	writeFile(t, filepath.Join(e.WorkDir(), "a.txt"), "alpha\n")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "a.txt"}, {"commit", "-q", "-m", "initial"}} {
		r := mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": append([]string{"git"}, args...)})
		if !r.OK {
			t.Fatalf("git %v: %s", args, r.Text())
		}
	}
	return e
}

func TestGitStatus(t *testing.T) {
	e := gitRepo(t)
	r := mustRun(t, e, "librarian", ToolGitStatus, nil)
	if !r.OK || r.Output != "## main\n" || !strings.Contains(r.Summary, "clean") {
		t.Fatalf("clean: %+v", r)
	}
	dir := e.WorkDir()
	writeFile(t, filepath.Join(dir, "a.txt"), "changed\n")
	writeFile(t, filepath.Join(dir, "new file.txt"), "n\n")
	writeFile(t, filepath.Join(dir, "staged.txt"), "s\n")
	mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"git", "add", "staged.txt"}})
	r = mustRun(t, e, "librarian", ToolGitStatus, map[string]any{})
	want := "## main\n M a.txt\nA  staged.txt\n?? new file.txt\n"
	if !r.OK || r.Output != want {
		t.Fatalf("status:\n%q\nwant\n%q", r.Output, want)
	}
	d := decodeData[statusData](t, r)
	if d.Branch != "main" || len(d.Entries) != 3 || d.Entries[2].Path != "new file.txt" || d.Entries[2].Index != "?" {
		t.Fatalf("data %+v", d)
	}
	if _, err := run(t, e, "librarian", ToolGitStatus, map[string]any{"porcelain": true}); !errors.Is(err, ErrInvalidArgs) {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestGitStatusOutsideRepo(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.Env.Set = map[string]string{"GIT_CEILING_DIRECTORIES": filepath.Dir(o.WorkDir)} })
	r := mustRun(t, e, "librarian", ToolGitStatus, nil)
	if r.OK || !strings.Contains(r.Error, "not a git repository") {
		t.Fatalf("outside a repo: %+v", r)
	}
}

func TestGitDiffAndCommit(t *testing.T) {
	e := gitRepo(t)
	dir := e.WorkDir()
	writeFile(t, filepath.Join(dir, "a.txt"), "alpha\nbeta\n")
	writeFile(t, filepath.Join(dir, "b.txt"), "bee\n")

	r := mustRun(t, e, "inspector", ToolGitDiff, nil)
	if !r.OK || !strings.Contains(r.Output, "+beta") || strings.Contains(r.Output, "b.txt") {
		t.Fatalf("diff: %+v", r)
	}
	r = mustRun(t, e, "inspector", ToolGitDiff, map[string]any{"staged": true})
	if !r.OK || r.Output != "" || r.Summary != "git_diff: no changes" {
		t.Fatalf("staged diff before add: %+v", r)
	}

	r = mustRun(t, e, "engineer", ToolGitCommit, map[string]any{"message": "add beta\n\nbody", "paths": []string{"a.txt"}})
	d := decodeData[commitData](t, r)
	if !r.OK || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(d.Commit) || !strings.Contains(r.Summary, "add beta") {
		t.Fatalf("commit: %+v %+v", r, d)
	}
	r = mustRun(t, e, "inspector", ToolGitDiff, map[string]any{"ref": "HEAD~1", "stat": true})
	if !r.OK || !strings.Contains(r.Output, "a.txt") {
		t.Fatalf("diff against HEAD~1: %+v", r)
	}
	log := mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"git", "log", "--format=%H %s", "-1"}})
	if !strings.HasPrefix(log.Stdout, d.Commit+" add beta") {
		t.Fatalf("git log: %q", log.Stdout)
	}

	// Nothing staged: git's own explanation comes back.
	r = mustRun(t, e, "engineer", ToolGitCommit, map[string]any{"message": "empty"})
	if r.OK || !strings.Contains(r.Error, "git commit failed") {
		t.Fatalf("empty commit: %+v", r)
	}
	r = mustRun(t, e, "engineer", ToolGitCommit, map[string]any{"message": "the rest", "all": true})
	if !r.OK {
		t.Fatalf("commit all: %+v", r)
	}
	if st := mustRun(t, e, "engineer", ToolGitStatus, nil); st.Output != "## main\n" {
		t.Fatalf("not clean after commit -A: %q", st.Output)
	}

	for _, args := range []map[string]any{
		{"message": ""},
		{"message": "x", "all": true, "paths": []string{"a.txt"}},
		{"message": "x", "paths": []string{".git/config"}},
		{"message": "x", "amend": true},
	} {
		if _, err := run(t, e, "engineer", ToolGitCommit, args); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("commit %v: err = %v, want ErrInvalidArgs", args, err)
		}
	}
	for _, ref := range []string{"--output=/tmp/x", "HEAD:a.txt", "a b"} {
		if _, err := run(t, e, "inspector", ToolGitDiff, map[string]any{"ref": ref}); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("diff ref %q: err = %v, want ErrInvalidArgs", ref, err)
		}
	}
}

// The git matrix: reads for everyone with tools, commits only for the
// engineer, and no tool at all for push, reset, merge and the like.
func TestGitPermissions(t *testing.T) {
	e := gitRepo(t)
	for _, agent := range []string{"engineer", "tester", "inspector", "librarian"} {
		for _, tool := range []string{ToolGitStatus, ToolGitDiff} {
			if _, err := run(t, e, agent, tool, nil); err != nil {
				t.Errorf("%s %s: %v", agent, tool, err)
			}
		}
	}
	for _, agent := range []string{"tester", "inspector", "librarian", "architect", "guide", "orchestrator", "archivalist", "academic", "nobody"} {
		if _, err := run(t, e, agent, ToolGitCommit, map[string]any{"message": "x", "all": true}); !errors.Is(err, ErrPermissionDenied) {
			t.Errorf("%s git_commit: err = %v, want ErrPermissionDenied", agent, err)
		}
	}
	for _, tool := range []string{"git_push", "git_reset", "git_reset_hard", "git_merge", "git_checkout", "git_branch_create", "git_stash"} {
		if _, err := run(t, e, "engineer", tool, nil); !errors.Is(err, ErrUnknownTool) {
			t.Errorf("engineer %s: err = %v, want ErrUnknownTool", tool, err)
		}
	}
}
