package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/tools"
)

// The pipeline agent's git work runs as recorded exec tool calls under call
// ids fixed by the pipeline and the purpose: a redelivery reuses the recorded
// output (the commit of a snapshot) and runs nothing again.

// identity lets commit-tree work where no git identity is configured; the
// snapshots are never on a branch.
const identity = `export GIT_AUTHOR_NAME=sylk GIT_AUTHOR_EMAIL=sylk@localhost GIT_COMMITTER_NAME=sylk GIT_COMMITTER_EMAIL=sylk@localhost
`

// snapshotScript commits the work directory as it is, uncommitted and
// untracked (not ignored) files included, through a temporary index, so
// neither the user's index nor any branch changes. Outside a git repository
// it prints nothing.
const snapshotScript = `set -e
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0
` + identity + `tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GIT_INDEX_FILE="$tmp/index"
parent=
if git rev-parse -q --verify HEAD >/dev/null; then git read-tree HEAD; parent="-p HEAD"; fi
git add -A :/
tree=$(git write-tree)
git commit-tree "$tree" $parent -m "sylk: snapshot"
`

// git runs a shell script in dir as a recorded call and returns its stdout.
func (a *Agent) git(ctx context.Context, d *agents.Delivery, dir, callKey, script string, where agents.ToolWhere) (string, error) {
	exec, err := a.Executors.For(dir)
	if err != nil {
		return "", agents.Permanent(err)
	}
	args, err := json.Marshal(map[string]any{"command": script, "shell": true, "timeout": 120})
	if err != nil {
		return "", agents.Permanent(err)
	}
	call := tools.Call{ID: tools.CallID(Name, callKey), Tool: tools.ToolExec, Args: args}
	res, _, err := d.RunTool(ctx, exec, a.records(), call, where)
	if err != nil {
		return "", err
	}
	if !res.OK {
		return "", fmt.Errorf("git in %s: %s", dirName(dir), strings.TrimSpace(res.Error+" "+res.Stderr+" "+res.Output))
	}
	return strings.TrimSpace(res.Stdout + res.Output), nil
}

func dirName(dir string) string {
	if dir == "" {
		return "the work directory"
	}
	return dir
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func quoteAll(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = shellQuote(x)
	}
	return strings.Join(q, " ")
}
