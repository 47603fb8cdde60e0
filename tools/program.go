package tools

import (
	"context"
	"fmt"
	"time"
)

// Program is a program the operator configured (a hook), not one a model
// asked for: no permission policy applies. It runs under the same control as
// exec (its own process group and the kill sequence, bounded output, the
// scrubbed environment, redaction) in the work directory, except that its
// timeout is hard: output does not extend it.
type Program struct {
	// Argv is the program and its arguments; a relative program path is
	// resolved against the work directory, a bare name through PATH.
	Argv []string
	// Stdin is written to the program's standard input (nil: none).
	Stdin []byte
	// Timeout stops the program, whatever it writes (default
	// Timeouts.Default, at most Timeouts.Max).
	Timeout time.Duration
	// MaxStdout is how many bytes of stdout ProgramResult.Raw keeps
	// verbatim (default 64 KiB).
	MaxStdout int
	// Env adds variables; credential names are refused as for exec.
	Env map[string]string
}

// DefaultProgramStdout is Program.MaxStdout's default.
const DefaultProgramStdout = 64 << 10

// ProgramResult is what a program did: the Result as exec reports it, and
// its stdout verbatim (redacted), for a caller that parses it.
type ProgramResult struct {
	Result
	// Raw is the first MaxStdout bytes of stdout; RawCut says there was
	// more.
	Raw    []byte
	RawCut bool
}

// RunProgram runs p and waits for it. It returns an error only when p is
// not a valid program (ErrInvalidArgs) or ctx ended (with the partial
// result); a program that fails, crashes or times out is a ProgramResult
// with OK false, as for exec.
func (e *Executor) RunProgram(ctx context.Context, p Program) (ProgramResult, error) {
	switch {
	case len(p.Argv) == 0 || p.Argv[0] == "":
		return ProgramResult{}, fmt.Errorf("%w: program: argv is empty", ErrInvalidArgs)
	case p.Timeout < 0:
		return ProgramResult{}, fmt.Errorf("%w: program %q: negative timeout %s", ErrInvalidArgs, p.Argv[0], p.Timeout)
	}
	if err := e.scrub.checkCallEnv(p.Env); err != nil {
		return ProgramResult{}, err
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = e.opts.Timeouts.Default
	}
	maxOut := p.MaxStdout
	if maxOut <= 0 {
		maxOut = DefaultProgramStdout
	}
	spec := procSpec{argv: p.Argv, dir: e.root.dir, env: appendCallEnv(e.env, p.Env), stdin: p.Stdin,
		base: timeout, hard: timeout, rawLimit: maxOut}
	start := time.Now()
	pr := e.runProcess(ctx, spec)
	res := e.processResult(pr, p.Argv[0], quoteArgv(p.Argv))
	res.took(time.Since(start))
	e.redactResult(&res)
	out := ProgramResult{Result: res}
	if pr.raw != nil {
		out.Raw, out.RawCut = []byte(e.red.Redact(string(pr.raw.b))), pr.raw.over
	}
	if pr.canceled {
		return out, fmt.Errorf("tools: program %q: %w", p.Argv[0], context.Cause(ctx))
	}
	return out, nil
}
