package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Executor runs tool calls for the agents of one session: it checks the
// agent's permissions, validates the arguments, keeps every path inside the
// work directory, runs subprocesses under control and redacts every result.
// It is safe for concurrent use.
type Executor struct {
	opts  Options
	root  workRoot
	det   *detector
	red   *Redactor
	scrub envScrubber
	env   []string // every child's environment before the call's additions
	pool  *Pool    // bounds the subprocesses: Options.Pool, or the executor's own
	bufs  sync.Pool
	tools map[string]*tool
	names []string
}

// tool is one built-in tool.
type tool struct {
	spec   ToolSpec
	fields []string // argument names, for error messages
	run    func(ctx context.Context, e *Executor, agent string, args json.RawMessage) (Result, error)
}

// NewExecutor applies defaults to opts, validates them and returns an
// Executor rooted at opts.WorkDir.
func NewExecutor(opts Options) (*Executor, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	root, err := newWorkRoot(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	opts.WorkDir = root.dir
	det, err := newDetector(opts.Output.ImportantPatterns, opts.Timeouts.NoisePatterns)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	red, err := NewRedactor(opts.Secrets)
	if err != nil {
		return nil, err
	}
	scrub := newEnvScrubber(opts.Env)
	base := opts.Env.Base
	if base == nil {
		base = os.Environ()
	}
	env, envSecrets := scrub.baseEnv(base, opts.Env.Set, opts.Secrets.MinValueLen)
	pool := opts.Pool
	if pool == nil {
		if pool, err = NewPool(opts.MaxConcurrent, 0); err != nil {
			return nil, err
		}
	}
	e := &Executor{
		opts:  opts,
		root:  root,
		det:   det,
		red:   red.withValues(envSecrets...),
		scrub: scrub,
		env:   env,
		pool:  pool,
		tools: map[string]*tool{},
	}
	e.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	for _, t := range e.builtins() {
		sch := t.schema()
		params, err := json.Marshal(sch)
		if err != nil {
			return nil, fmt.Errorf("tools: schema of %q: %w", t.name, err)
		}
		e.tools[t.name] = &tool{
			spec:   ToolSpec{Name: t.name, Description: t.desc, Parameters: params, ReadOnly: t.readOnly},
			fields: propertyNames(sch),
			run:    t.run,
		}
		e.names = append(e.names, t.name)
	}
	sort.Strings(e.names)
	return e, nil
}

// builtin is the definition of a built-in tool.
type builtin struct {
	name, desc string
	readOnly   bool
	schema     func() schema
	run        func(ctx context.Context, e *Executor, agent string, args json.RawMessage) (Result, error)
}

func (e *Executor) builtins() []builtin {
	return []builtin{
		e.execTool(),
		e.readFileTool(), e.writeFileTool(), e.editFileTool(),
		e.listTool(), e.globTool(), e.grepTool(),
		e.gitStatusTool(), e.gitDiffTool(), e.gitCommitTool(),
	}
}

// WorkDir returns the work directory, symlinks resolved.
func (e *Executor) WorkDir() string { return e.root.dir }

// Redactor returns the executor's redactor, which knows the configured
// secrets and the values of the scrubbed environment variables, so the
// caller can clean other text (LLM messages, logs) the same way.
func (e *Executor) Redactor() *Redactor { return e.red }

// Schemas returns the specs of all built-in tools, sorted by name.
func (e *Executor) Schemas() []ToolSpec {
	out := make([]ToolSpec, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, e.tools[n].spec)
	}
	return out
}

// SchemasFor returns the specs of the tools agent may call, sorted by name:
// what to offer that agent's LLM.
func (e *Executor) SchemasFor(agent string) []ToolSpec {
	var out []ToolSpec
	for _, n := range e.names {
		if e.opts.Permissions.Allows(agent, n) {
			out = append(out, e.tools[n].spec)
		}
	}
	return out
}

// Run executes call on behalf of agent.
//
// It returns an error, and a zero Result, when the call is refused:
// ErrInvalidCall, ErrUnknownTool, ErrPermissionDenied, ErrInvalidArgs or
// ErrPathEscape (test with errors.Is). Refusals are permanent; the message
// says what to change. A tool that runs and fails (non-zero exit, timeout,
// missing file, edit text not found) is a Result with OK == false and no
// error: record it like any other result.
//
// If ctx ends while a process runs, the process group goes through the kill
// sequence and Run returns the partial Result (Canceled, Partial) together
// with an error wrapping ctx.Err(): the call was interrupted, not answered,
// and should not be recorded as its final result.
//
// Every text in the Result and in the error has passed through the Redactor.
func (e *Executor) Run(ctx context.Context, agent string, call Call) (Result, error) {
	if err := checkCall(call); err != nil {
		return Result{}, e.redactErr(err)
	}
	t, ok := e.tools[call.Tool]
	if !ok {
		return Result{}, e.redactErr(fmt.Errorf("%w: %q (tools: %s)", ErrUnknownTool, truncForMsg(call.Tool), strings.Join(e.names, ", ")))
	}
	if !e.opts.Permissions.Allows(agent, call.Tool) {
		allowed := e.opts.Permissions.AllowedTools(agent)
		what := "no tools"
		if len(allowed) > 0 {
			what = strings.Join(allowed, ", ")
		}
		return Result{}, e.redactErr(fmt.Errorf("%w: agent %q may not call %q (it may call: %s)", ErrPermissionDenied, truncForMsg(agent), call.Tool, what))
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("tools: call %s (%s) not started: %w", call.ID, call.Tool, err)
	}
	if call.Permitted {
		ctx = context.WithValue(ctx, permittedKey{}, true)
	}
	start := time.Now()
	res, err := t.run(ctx, e, agent, call.Args)
	if err != nil && !isInterrupted(err) {
		return Result{}, e.redactErr(err)
	}
	res.CallID, res.Tool = call.ID, call.Tool
	res.took(time.Since(start))
	e.redactResult(&res)
	if err != nil {
		return res, e.redactErr(err)
	}
	return res, nil
}

// permittedKey marks the context of a call the user permitted (Call.Permitted).
type permittedKey struct{}

func permitted(ctx context.Context) bool { return ctx.Value(permittedKey{}) != nil }

// interruptedError marks a call stopped by its context.
type interruptedError struct{ err error }

func (e *interruptedError) Error() string { return "tools: call interrupted: " + e.err.Error() }
func (e *interruptedError) Unwrap() error { return e.err }

func isInterrupted(err error) bool {
	var ie *interruptedError
	return errors.As(err, &ie)
}

// redactedError carries a redacted message and the original chain for
// errors.Is.
type redactedError struct {
	msg string
	err error
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }

func (e *Executor) redactErr(err error) error {
	msg := err.Error()
	if red := e.red.Redact(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

func (e *Executor) redactResult(r *Result) {
	r.Output = e.red.Redact(r.Output)
	r.Stdout = e.red.Redact(r.Stdout)
	r.Stderr = e.red.Redact(r.Stderr)
	r.Summary = e.red.Redact(r.Summary)
	r.Error = e.red.Redact(r.Error)
	if len(r.Data) > 0 {
		r.Data = e.redactJSON(r.Data)
	}
}

// redactJSON redacts every string in a JSON document, keeping it valid.
func (e *Executor) redactJSON(raw json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		b, _ := json.Marshal(e.red.Redact(string(raw)))
		return b
	}
	v = e.redactValue(v)
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func (e *Executor) redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return e.red.Redact(x)
	case []any:
		for i := range x {
			x[i] = e.redactValue(x[i])
		}
	case map[string]any:
		for k, val := range x {
			x[k] = e.redactValue(val)
		}
	}
	return v
}

// failed is the Result of a tool that ran and could not do what was asked.
func failed(format string, args ...any) Result {
	msg := fmt.Sprintf(format, args...)
	return Result{OK: false, ExitCode: -1, Error: msg}
}

// dataOf marshals a tool's structured result.
func dataOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
