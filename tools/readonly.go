package tools

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// readOnlyCommands are programs that only read, each with the subcommands
// that only read (nil: any arguments). Plan mode lets an agent run these and
// nothing else through exec.
var readOnlyCommands = map[string][]string{
	"ls": nil, "cat": nil, "head": nil, "tail": nil, "wc": nil, "grep": nil, "rg": nil,
	"pwd": nil, "tree": nil, "file": nil, "stat": nil, "du": nil, "diff": nil, "which": nil,
	"git": {"status", "log", "diff", "show", "ls-files", "blame", "grep", "rev-parse", "describe"},
	"go":  {"list", "doc", "vet", "env", "version"},
}

// findWrites are find's options that change files or run programs.
var findWrites = []string{"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls"}

// ReadOnlyCall reports whether call changes nothing in the work directory: a
// read-only tool, or exec of a program that only reads (argv, not a shell
// line: a shell line cannot be checked). When it does not, the reason says
// why, for the model to read.
func (e *Executor) ReadOnlyCall(call Call) (bool, string) {
	t, ok := e.tools[call.Tool]
	if !ok {
		return false, fmt.Sprintf("%q is not a tool", call.Tool)
	}
	if t.spec.ReadOnly {
		return true, ""
	}
	if call.Tool != ToolExec {
		return false, call.Tool + " changes files"
	}
	var a execArgs
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return false, "exec arguments that do not parse"
	}
	if a.Shell || len(a.Argv) == 0 {
		return false, "a shell command line cannot be checked; pass argv of a read-only program"
	}
	prog := filepath.Base(a.Argv[0])
	if prog == "find" {
		for _, arg := range a.Argv[1:] {
			if slices.Contains(findWrites, arg) {
				return false, "find " + arg + " changes files or runs programs"
			}
		}
		return true, ""
	}
	subs, ok := readOnlyCommands[prog]
	switch {
	case !ok:
		return false, fmt.Sprintf("%q is not a read-only program (allowed: %s)", prog, strings.Join(readOnlyPrograms(), ", "))
	case subs == nil:
		return true, ""
	case len(a.Argv) > 1 && slices.Contains(subs, a.Argv[1]):
		return true, ""
	}
	return false, fmt.Sprintf("%s may only run %s %s", prog, prog, strings.Join(subs, "|"))
}

func readOnlyPrograms() []string {
	out := []string{"find"}
	for p := range readOnlyCommands {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
