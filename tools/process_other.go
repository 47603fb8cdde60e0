//go:build !unix

package tools

import (
	"context"
	"errors"
	"fmt"
	"time"
)

type procSpec struct {
	argv     []string
	dir      string
	env      []string
	stdin    []byte
	base     time.Duration
	rawLimit int
	hard     time.Duration
}

type procResult struct {
	pid         int // the process (and group) id; 0 when it did not start
	exitCode    int
	signal      string
	startErr    error
	timedOut    bool
	canceled    bool
	killSignals []string
	orphans     bool
	survivors   bool
	stdout      *capture
	stderr      *capture
	raw         *rawBuf
	duration    time.Duration
	base        time.Duration
	memLimit    int64
}

// runProcess is not implemented without Unix process groups (on Windows it
// would need a Job Object).
func (e *Executor) runProcess(ctx context.Context, spec procSpec) procResult {
	return procResult{exitCode: -1, startErr: errors.ErrUnsupported,
		stdout: newCapture(e.opts.Output, e.det), stderr: newCapture(e.opts.Output, e.det)}
}

func startErrorText(argv0 string, err error) string {
	return fmt.Sprintf("cannot start %q: %v", argv0, err)
}

// totalMemory is not read on this system.
func totalMemory() uint64 { return 0 }

// MemoryLimitText says that no memory limit applies here: processes do not
// run at all.
func (o *Options) MemoryLimitText() string { return "none (no tool processes on this system)" }
