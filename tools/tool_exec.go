package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// maxStdinBytes caps the stdin argument of exec.
const maxStdinBytes = 8 << 20

type execArgs struct {
	Argv    []string          `json:"argv"`
	Command string            `json:"command"`
	Shell   bool              `json:"shell"`
	Dir     string            `json:"dir"`
	Env     map[string]string `json:"env"`
	Timeout float64           `json:"timeout"`
	Stdin   *string           `json:"stdin"`
}

func (e *Executor) execTool() builtin {
	maxSec := int(e.opts.Timeouts.Max / time.Second)
	return builtin{
		name: ToolExec,
		desc: "Run a program in the work directory and return its exit code and output. " +
			"Pass argv (the program and its arguments, no shell); for pipes, redirections or globs pass command with \"shell\": true. " +
			"Long output is truncated to its first and last lines plus the lines with errors, warnings and file:line locations. " +
			"A command that stays silent past its timeout is stopped (SIGINT, SIGTERM, SIGKILL to its whole process group).",
		schema: func() schema {
			return object(schema{
				"argv":    strArray(`Program and arguments, run directly without a shell, e.g. ["go", "test", "./..."]. Use this unless you need shell syntax.`, 1),
				"command": nonEmptyStr(`A shell command line, e.g. "go test ./... 2>&1 | tail -n 20". Requires "shell": true.`),
				"shell":   boolean(`Run "command" with /bin/sh -c. Default false.`),
				"dir":     str(`Working directory relative to the work directory. Default: the work directory.`),
				"env": schema{"type": "object", "additionalProperties": schema{"type": "string"},
					"description": "Extra environment variables. Credential variables (*_TOKEN, *_API_KEY, ...) cannot be set."},
				"timeout": schema{"type": "number", "exclusiveMinimum": 0, "maximum": maxSec,
					"description": fmt.Sprintf("Base timeout in seconds; meaningful output extends it, up to %d s. Default: 60 s, longer for builds and tests.", maxSec)},
				"stdin": str("Text to give the command on standard input. Default: none."),
			})
		},
		run: func(ctx context.Context, e *Executor, agent string, raw json.RawMessage) (Result, error) {
			var a execArgs
			if err := decodeArgs(ToolExec, e.tools[ToolExec].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.runExec(ctx, agent, a)
		},
	}
}

func (e *Executor) runExec(ctx context.Context, agent string, a execArgs) (Result, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: exec: "+format, append([]any{ErrInvalidArgs}, args...)...)
	}
	switch {
	case len(a.Argv) > 0 && a.Command != "":
		return Result{}, bad("give either argv or command, not both")
	case len(a.Argv) == 0 && a.Command == "":
		return Result{}, bad(`argv is required: the program and its arguments, e.g. {"argv": ["go", "test", "./..."]}`)
	case a.Command != "" && !a.Shell:
		return Result{}, bad(`"command" runs through a shell only with "shell": true; to run a program directly pass argv, e.g. {"argv": ["go", "test", "./..."]}`)
	case a.Shell && len(a.Argv) > 0:
		return Result{}, bad(`"shell": true goes with "command" (a shell line), not with argv`)
	case len(a.Argv) > 0 && a.Argv[0] == "":
		return Result{}, bad("argv[0] (the program) is empty")
	case math.IsNaN(a.Timeout) || a.Timeout < 0:
		return Result{}, bad("timeout must be a positive number of seconds")
	case a.Timeout > e.opts.Timeouts.Max.Seconds():
		return Result{}, bad("timeout %g s exceeds the cap of %g s", a.Timeout, e.opts.Timeouts.Max.Seconds())
	case a.Stdin != nil && len(*a.Stdin) > maxStdinBytes:
		return Result{}, bad("stdin is %d bytes, over the %d byte limit", len(*a.Stdin), maxStdinBytes)
	}
	for i, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return Result{}, bad("argv[%d] contains a NUL byte", i)
		}
	}
	if strings.IndexByte(a.Command, 0) >= 0 {
		return Result{}, bad("command contains a NUL byte")
	}
	if err := e.scrub.checkCallEnv(a.Env); err != nil {
		return Result{}, err
	}
	argv, words := a.Argv, a.Argv
	if a.Shell {
		argv = append(append([]string{}, e.opts.Shell...), a.Command)
		words = strings.Fields(a.Command)
	}
	if !permitted(ctx) {
		if err := e.opts.Permissions.AllowsCommand(agent, a.Argv, a.Shell); err != nil {
			return Result{}, err
		}
	}
	dir := e.root.dir
	if a.Dir != "" {
		_, abs, err := e.root.resolve("dir", a.Dir)
		if err != nil {
			if IsRefusal(err) {
				return Result{}, err
			}
			return failed("exec: dir %q: %v", a.Dir, err), nil
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return failed("exec: dir %q: %v", a.Dir, err), nil
		}
		if !fi.IsDir() {
			return failed("exec: dir %q is not a directory", a.Dir), nil
		}
		dir = abs
	}
	spec := procSpec{
		argv: argv,
		dir:  dir,
		env:  appendCallEnv(e.env, a.Env),
		base: baseTimeout(e.opts.Timeouts, words, time.Duration(a.Timeout*float64(time.Second))),
	}
	if a.Stdin != nil {
		spec.stdin = []byte(*a.Stdin)
	}
	what := quoteArgv(a.Argv)
	if a.Shell {
		what = fmt.Sprintf("sh -c %q", truncForMsg(a.Command))
	}
	pr := e.runProcess(ctx, spec)
	res := e.processResult(pr, argv[0], what)
	if pr.canceled {
		return res, &interruptedError{err: context.Cause(ctx)}
	}
	return res, nil
}

// processResult turns a finished process into a Result.
func (e *Executor) processResult(pr procResult, argv0, what string) Result {
	r := Result{
		PID:         pr.pid,
		ExitCode:    pr.exitCode,
		Signal:      pr.signal,
		KillSignals: pr.killSignals,
		TimedOut:    pr.timedOut,
		Canceled:    pr.canceled,
		Partial:     pr.timedOut || pr.canceled,
	}
	if pr.startErr != nil {
		r.Error = startErrorText(argv0, pr.startErr)
		if pr.canceled {
			r.Error = "canceled before it started"
		}
		r.Summary = what + ": did not start"
		return r
	}
	r.Stdout, r.Stderr = pr.stdout.render(), pr.stderr.render()
	r.StdoutBytes, r.StderrBytes = pr.stdout.total, pr.stderr.total
	r.StdoutLines, r.StderrLines = pr.stdout.lines, pr.stderr.lines
	r.Truncated = pr.stdout.truncated() || pr.stderr.truncated()
	r.OK = pr.exitCode == 0 && pr.signal == "" && !pr.timedOut && !pr.canceled

	var outcome string
	switch {
	case pr.timedOut:
		outcome = fmt.Sprintf("timed out after %s (base timeout %s; output that is not noise extends it by %s, up to %s)",
			roundDur(pr.duration), roundDur(pr.base), roundDur(e.opts.Timeouts.ExtendOnOutput), roundDur(e.opts.Timeouts.Max))
	case pr.canceled:
		outcome = fmt.Sprintf("canceled after %s", roundDur(pr.duration))
	case pr.signal != "":
		outcome = fmt.Sprintf("killed by %s after %s", pr.signal, roundDur(pr.duration))
	default:
		outcome = fmt.Sprintf("exit status %d after %s", pr.exitCode, roundDur(pr.duration))
	}
	if len(pr.killSignals) > 0 && (pr.timedOut || pr.canceled) {
		outcome += "; stopped with " + strings.Join(pr.killSignals, ", ") + "; output is partial"
	}
	if !r.OK && !pr.timedOut && !pr.canceled && pr.memLimit > 0 {
		if m := memoryOutcome(pr.memLimit, pr.signal, r.Stderr, r.Stdout); m != "" {
			outcome += "; " + m
		}
	}
	if pr.orphans {
		outcome += "; background processes it left running were killed"
	}
	r.Summary = fmt.Sprintf("%s: %s; stdout: %s; stderr: %s", what, outcome, pr.stdout.summary(), pr.stderr.summary())
	if !r.OK {
		r.Error = outcome
	}
	return r
}

func roundDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n\"'\\$`|&;<>*?()[]{}") {
			q[i] = a
		} else {
			q[i] = fmt.Sprintf("%q", a)
		}
	}
	return truncForMsg(strings.Join(q, " "))
}
