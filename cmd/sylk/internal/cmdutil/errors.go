package cmdutil

import (
	"errors"
	"fmt"
)

// Exit codes, mapped in one place (cmd/sylk's exitCode).
const (
	ExitOK      = 0
	ExitError   = 1
	ExitUsage   = 2
	ExitFailure = 3 // the command ran, and what it ran failed (a DAG, a verify)
)

// ErrSilent marks an error already reported to the user: exit 1, nothing more
// printed.
var ErrSilent = errors.New("silent")

// UsageError is a mistake in how a command was called: exit 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{Err: fmt.Errorf(format, args...)} }

// ExitCodeError ends the command with Code after it has printed its own
// result.
type ExitCodeError struct{ Code int }

func (e ExitCodeError) Error() string { return fmt.Sprintf("exit %d", e.Code) }
