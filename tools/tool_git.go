package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

const (
	// gitRawLimit bounds the git output a tool parses.
	gitRawLimit = 8 << 20
	// maxCommitMessage caps git_commit's message.
	maxCommitMessage = 64 << 10
)

// runGit runs git in the work directory, non-interactively and without
// colour, under the same process control as exec.
func (e *Executor) runGit(ctx context.Context, raw bool, args ...string) procResult {
	argv := append([]string{"git", "--no-pager", "-c", "color.ui=false", "-c", "core.quotepath=false"}, args...)
	spec := procSpec{
		argv: argv,
		dir:  e.root.dir,
		env:  e.env,
		base: baseTimeout(e.opts.Timeouts, []string{"git", args[0]}, 0),
	}
	if raw {
		spec.rawLimit = gitRawLimit
	}
	return e.runProcess(ctx, spec)
}

// gitOutcome turns a failed or interrupted git run into the tool's answer;
// ok is true when the run succeeded and the caller should go on.
func (e *Executor) gitOutcome(ctx context.Context, tool string, pr procResult, args ...string) (res Result, ok bool, err error) {
	what := "git " + strings.Join(args, " ")
	if pr.startErr == nil && pr.exitCode == 0 && !pr.timedOut && !pr.canceled {
		return Result{}, true, nil
	}
	res = e.processResult(pr, "git", truncForMsg(what))
	if pr.startErr == nil && pr.exitCode > 0 {
		// git explains itself on stderr (or stdout for "nothing to commit").
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = strings.TrimSpace(res.Stdout)
		}
		res.Error = fmt.Sprintf("%s: %s failed (exit status %d): %s", tool, truncForMsg(what), pr.exitCode, firstLines(msg, 20))
	} else {
		res.Error = tool + ": " + res.Error
	}
	if pr.canceled {
		return res, false, &interruptedError{err: context.Cause(ctx)}
	}
	return res, false, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

type gitStatusArgs struct{}

type statusEntry struct {
	Path     string `json:"path"`
	OrigPath string `json:"orig_path,omitempty"`
	Index    string `json:"index"`    // status in the index (staged): M, A, D, R, C, U, ?, !, or " "
	Worktree string `json:"worktree"` // status in the work tree
}

type statusData struct {
	Branch    string        `json:"branch"`
	Entries   []statusEntry `json:"entries"`
	Truncated bool          `json:"truncated,omitempty"`
}

func (e *Executor) gitStatusTool() builtin {
	return builtin{
		name:     ToolGitStatus,
		readOnly: true,
		desc:     "Show the git branch and the changed, staged and untracked files of the work directory (like git status --short --branch).",
		schema:   func() schema { return object(schema{}) },
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a gitStatusArgs
			if err := decodeArgs(ToolGitStatus, e.tools[ToolGitStatus].fields, raw, &a); err != nil {
				return Result{}, err
			}
			args := []string{"status", "--porcelain=v1", "-z", "--branch", "--untracked-files=normal"}
			pr := e.runGit(ctx, true, args...)
			if res, ok, err := e.gitOutcome(ctx, ToolGitStatus, pr, args...); !ok {
				return res, err
			}
			d := parseStatus(pr.raw.b, e.opts.Files.MaxEntries)
			d.Truncated = d.Truncated || pr.raw.over
			var out strings.Builder
			fmt.Fprintf(&out, "## %s\n", d.Branch)
			for _, en := range d.Entries {
				if en.OrigPath != "" {
					fmt.Fprintf(&out, "%s%s %s -> %s\n", en.Index, en.Worktree, en.OrigPath, en.Path)
				} else {
					fmt.Fprintf(&out, "%s%s %s\n", en.Index, en.Worktree, en.Path)
				}
			}
			summary := fmt.Sprintf("git_status: branch %s, %d changed or untracked paths", d.Branch, len(d.Entries))
			if len(d.Entries) == 0 {
				summary = fmt.Sprintf("git_status: branch %s, clean", d.Branch)
			}
			if d.Truncated {
				summary += " (truncated)"
			}
			return Result{OK: true, Output: out.String(), Truncated: d.Truncated, Data: dataOf(d), Summary: summary}, nil
		},
	}
}

// parseStatus parses `git status --porcelain=v1 -z --branch`.
func parseStatus(b []byte, most int) statusData {
	d := statusData{Entries: []statusEntry{}}
	fields := bytes.Split(b, []byte{0})
	for i := 0; i < len(fields); i++ {
		f := string(fields[i])
		if f == "" {
			continue
		}
		if br, ok := strings.CutPrefix(f, "## "); ok {
			d.Branch = br
			continue
		}
		if len(f) < 4 {
			continue
		}
		en := statusEntry{Index: f[0:1], Worktree: f[1:2], Path: f[3:]}
		if (f[0] == 'R' || f[0] == 'C') && i+1 < len(fields) {
			i++
			en.OrigPath = string(fields[i])
		}
		if len(d.Entries) >= most {
			d.Truncated = true
			continue
		}
		d.Entries = append(d.Entries, en)
	}
	return d
}

type gitDiffArgs struct {
	Staged bool     `json:"staged"`
	Ref    string   `json:"ref"`
	Paths  []string `json:"paths"`
	Stat   bool     `json:"stat"`
}

func (e *Executor) gitDiffTool() builtin {
	return builtin{
		name:     ToolGitDiff,
		readOnly: true,
		desc: "Show changes as a unified diff: unstaged changes by default, staged ones with staged, or against a commit with ref. " +
			"Long diffs are truncated to their first and last lines plus lines that look important.",
		schema: func() schema {
			return object(schema{
				"staged": boolean("Show changes staged for the next commit (git diff --cached). Default false."),
				"ref":    str(`Compare the work tree with this commit or range, e.g. "HEAD~1" or "main..HEAD".`),
				"paths":  strArray("Limit the diff to these paths, relative to the work directory.", 0),
				"stat":   boolean("Show a per-file summary (--stat) instead of the full diff. Default false."),
			})
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a gitDiffArgs
			if err := decodeArgs(ToolGitDiff, e.tools[ToolGitDiff].fields, raw, &a); err != nil {
				return Result{}, err
			}
			args := []string{"diff", "--no-color", "--no-ext-diff"}
			if a.Staged {
				args = append(args, "--cached")
			}
			if a.Stat {
				args = append(args, "--stat")
			}
			if a.Ref != "" {
				if err := checkRef(a.Ref); err != nil {
					return Result{}, err
				}
				args = append(args, a.Ref)
			}
			rels, err := e.gitPaths(ToolGitDiff, a.Paths)
			if err != nil {
				return Result{}, err
			}
			args = append(append(args, "--"), rels...)
			pr := e.runGit(ctx, false, args...)
			if res, ok, err := e.gitOutcome(ctx, ToolGitDiff, pr, args...); !ok {
				return res, err
			}
			r := Result{OK: true, Output: pr.stdout.render(), Truncated: pr.stdout.truncated(),
				StdoutBytes: pr.stdout.total, StdoutLines: pr.stdout.lines}
			if pr.stdout.total == 0 {
				r.Summary = "git_diff: no changes"
			} else {
				r.Summary = "git_diff: " + pr.stdout.summary()
			}
			return r, nil
		},
	}
}

// checkRef refuses anything but a plain revision: no option (-x), no
// spaces, no path (a:b).
func checkRef(ref string) error {
	if len(ref) > 256 || strings.HasPrefix(ref, "-") {
		return fmt.Errorf("%w: ref %q is not a revision", ErrInvalidArgs, truncForMsg(ref))
	}
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		if !(setAlnum[c] || strings.IndexByte("._/@{}^~-", c) >= 0) {
			return fmt.Errorf("%w: ref %q contains %q; give a commit, branch, tag or A..B range", ErrInvalidArgs, truncForMsg(ref), string(c))
		}
	}
	return nil
}

// gitPaths resolves path arguments for git, refusing escapes and .git.
func (e *Executor) gitPaths(tool string, paths []string) ([]string, error) {
	rels := make([]string, 0, len(paths))
	for i, p := range paths {
		rel, _, err := e.root.resolve(fmt.Sprintf("paths[%d]", i), p)
		if err != nil {
			if IsRefusal(err) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s: paths[%d] %q: %s", ErrInvalidArgs, tool, i, p, describeFSError(p, err))
		}
		if inGitDir(rel) {
			return nil, fmt.Errorf("%w: %s: paths[%d] %q is inside .git", ErrInvalidArgs, tool, i, p)
		}
		rels = append(rels, relSlash(rel))
	}
	return rels, nil
}

type gitCommitArgs struct {
	Message string   `json:"message"`
	Paths   []string `json:"paths"`
	All     bool     `json:"all"`
}

type commitData struct {
	Commit string   `json:"commit"`
	Added  []string `json:"added,omitempty"`
}

func (e *Executor) gitCommitTool() builtin {
	return builtin{
		name: ToolGitCommit,
		desc: "Record a git commit in the work directory. Stage paths first (or every change with all), then commit what is staged with message. " +
			"Hooks run; nothing is pushed.",
		schema: func() schema {
			return object(schema{
				"message": nonEmptyStr("The commit message: a summary line, optionally a blank line and a body."),
				"paths":   strArray("Paths to stage (git add) before committing, relative to the work directory.", 0),
				"all":     boolean("Stage every change, including new and deleted files (git add -A), before committing. Default false."),
			}, "message")
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a gitCommitArgs
			if err := decodeArgs(ToolGitCommit, e.tools[ToolGitCommit].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.gitCommit(ctx, a)
		},
	}
}

func (e *Executor) gitCommit(ctx context.Context, a gitCommitArgs) (Result, error) {
	switch {
	case strings.TrimSpace(a.Message) == "":
		return Result{}, fmt.Errorf("%w: git_commit: message is required", ErrInvalidArgs)
	case len(a.Message) > maxCommitMessage:
		return Result{}, fmt.Errorf("%w: git_commit: message is longer than %d bytes", ErrInvalidArgs, maxCommitMessage)
	case strings.IndexByte(a.Message, 0) >= 0:
		return Result{}, fmt.Errorf("%w: git_commit: message contains a NUL byte", ErrInvalidArgs)
	case a.All && len(a.Paths) > 0:
		return Result{}, fmt.Errorf("%w: git_commit: give paths or all, not both", ErrInvalidArgs)
	}
	rels, err := e.gitPaths(ToolGitCommit, a.Paths)
	if err != nil {
		return Result{}, err
	}
	var add []string
	switch {
	case a.All:
		add = []string{"add", "-A"}
	case len(rels) > 0:
		add = append([]string{"add", "--"}, rels...)
	}
	if add != nil {
		pr := e.runGit(ctx, false, add...)
		if res, ok, err := e.gitOutcome(ctx, ToolGitCommit, pr, add...); !ok {
			return res, err
		}
	}
	commit := []string{"commit", "-m", a.Message}
	pr := e.runGit(ctx, false, commit...)
	if res, ok, err := e.gitOutcome(ctx, ToolGitCommit, pr, "commit"); !ok {
		return res, err
	}
	out := pr.stdout.render()
	rev := []string{"rev-parse", "HEAD"}
	pr2 := e.runGit(ctx, true, rev...)
	if res, ok, err := e.gitOutcome(ctx, ToolGitCommit, pr2, rev...); !ok {
		return res, err
	}
	d := commitData{Commit: strings.TrimSpace(string(pr2.raw.b)), Added: rels}
	if a.All {
		d.Added = []string{"-A"}
	}
	subject, _, _ := strings.Cut(a.Message, "\n")
	return Result{OK: true, Output: out, Data: dataOf(d),
		Summary: fmt.Sprintf("git_commit: %s %s", shortSHA(d.Commit), truncForMsg(subject))}, nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
