package hooks

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sylk/sylk/tools"
)

// GitOp is a class of git operations of the seed's permission matrix (seed
// L22726-22773).
type GitOp string

// The matrix's rows, by class.
const (
	GitRead    GitOp = "read"    // status, diff, log, show, blame, ls-files, branch (list)
	GitCommit  GitOp = "commit"  // add, commit, stash
	GitBranch  GitOp = "branch"  // branch (create), checkout, switch
	GitHistory GitOp = "history" // revert, cherry-pick, reset (soft)
	GitRemote  GitOp = "remote"  // fetch, pull
	GitClone   GitOp = "clone"
	// GitNever is what no agent may do: reset --hard, push, merge, and any
	// subcommand the matrix does not name.
	GitNever GitOp = "never"
)

// GitMatrix is which agent may run which class of git operation. An agent
// not in it may run none: default deny.
var GitMatrix = map[string][]GitOp{
	"engineer":  {GitRead, GitCommit},
	"designer":  {GitRead, GitCommit},
	"inspector": {GitRead},
	// The seed lets the Tester commit only when tests improved; the tool
	// policy does not grant it git_commit by default.
	"tester":    {GitRead, GitCommit},
	"architect": {GitRead, GitCommit, GitBranch, GitHistory, GitRemote},
	"librarian": {GitRead, GitBranch, GitRemote, GitClone},
}

var gitSubcommands = map[string]GitOp{
	"status": GitRead, "diff": GitRead, "log": GitRead, "show": GitRead, "blame": GitRead, "ls-files": GitRead,
	"ls-tree": GitRead, "rev-parse": GitRead, "describe": GitRead, "grep": GitRead, "shortlog": GitRead, "tag": GitRead,
	"add": GitCommit, "commit": GitCommit, "stash": GitCommit, "rm": GitCommit, "mv": GitCommit,
	"checkout": GitBranch, "switch": GitBranch,
	"revert": GitHistory, "cherry-pick": GitHistory,
	"fetch": GitRemote, "pull": GitRemote,
	"clone": GitClone,
	"push":  GitNever, "merge": GitNever, "rebase": GitNever, "am": GitNever, "filter-branch": GitNever, "gc": GitNever,
}

// gitOp classifies one git command line (the words after "git").
func gitOp(args []string) (GitOp, string) {
	// Skip global options: -C dir, -c k=v, --no-pager, --git-dir=...
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if (args[0] == "-C" || args[0] == "-c") && len(args) > 1 {
			args = args[1:]
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return GitRead, "git"
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "branch":
		for _, a := range rest {
			switch a {
			case "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l", "--show-current", "--merged", "--no-merged", "--contains":
			default:
				return GitBranch, "git branch " + a
			}
		}
		return GitRead, "git branch"
	case "reset":
		if slices.Contains(rest, "--hard") || slices.Contains(rest, "--merge") || slices.Contains(rest, "--keep") {
			return GitNever, "git reset --hard"
		}
		return GitHistory, "git reset"
	case "tag":
		if len(rest) > 0 && !slices.Contains([]string{"-l", "--list", "-n"}, rest[0]) {
			return GitNever, "git tag " + rest[0]
		}
	}
	if op, ok := gitSubcommands[sub]; ok {
		return op, "git " + sub
	}
	return GitNever, "git " + sub
}

// gitCommands finds the git invocations of a tool call: the git tools, exec
// of git, and git in a shell line (split into simple commands on ; & | and
// newlines: a best effort, since a shell line can hide a command).
func gitCommands(tool string, args map[string]any) [][]string {
	switch tool {
	case tools.ToolGitStatus:
		return [][]string{{"status"}}
	case tools.ToolGitDiff:
		return [][]string{{"diff"}}
	case tools.ToolGitCommit:
		return [][]string{{"commit"}}
	case tools.ToolExec:
	default:
		return nil
	}
	if cmd, ok := args["command"].(string); ok {
		var out [][]string
		for _, part := range strings.FieldsFunc(cmd, func(r rune) bool { return strings.ContainsRune(";&|\n()`", r) }) {
			words := strings.Fields(part)
			for i, w := range words {
				if strings.Trim(filepath.Base(w), `"'`) == "git" {
					out = append(out, words[i+1:])
					break
				}
			}
		}
		return out
	}
	argv, _ := args["argv"].([]any)
	if len(argv) == 0 {
		return nil
	}
	if prog, _ := argv[0].(string); filepath.Base(prog) != "git" {
		return nil
	}
	words := make([]string, 0, len(argv)-1)
	for _, a := range argv[1:] {
		s, _ := a.(string)
		words = append(words, s)
	}
	return [][]string{words}
}

// GitPermissions is the git permission matrix as a pre_tool hook: a git
// operation the agent's row does not allow is blocked, naming the operation
// and what the agent may do instead.
func GitPermissions(matrix map[string][]GitOp) Hook {
	return Hook{Name: "git_permissions", Point: PreTool, Priority: First, Source: "builtin",
		Trigger: []string{tools.ToolExec, tools.ToolGitStatus, tools.ToolGitDiff, tools.ToolGitCommit},
		Run: func(_ context.Context, d *Data) (Decision, error) {
			for _, args := range gitCommands(d.Tool, d.Args) {
				op, what := gitOp(args)
				allowed := matrix[d.Agent]
				if op != GitNever && slices.Contains(allowed, op) {
					continue
				}
				why := fmt.Sprintf("%s is a %s operation, which the %s may not run", what, op, d.Agent)
				if op == GitNever {
					why = what + " is not allowed to any agent"
				}
				may := "no git operation"
				if len(allowed) > 0 {
					names := make([]string, len(allowed))
					for i, a := range allowed {
						names[i] = string(a)
					}
					may = strings.Join(names, ", ") + " operations"
				}
				return Decision{Action: Block, Reason: fmt.Sprintf("git permission matrix: %s (it may run %s)", why, may)}, nil
			}
			return Decision{}, nil
		}}
}
