package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, mapped in one place.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitFailure = 3 // the command ran, and what it ran failed (a DAG, a verify)
)

// errSilent marks an error already reported to the user.
var errSilent = errors.New("silent")

// usageError is a mistake in how a command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run executes the CLI and returns the process exit code. SIGINT and SIGTERM
// cancel the command's context, so deferred shutdown of the broker and stores
// always runs.
func run(args []string, io *IOStreams) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := newFactory(io)
	root := newRootCmd(f)
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	err := root.ExecuteContext(ctx)
	f.Close(ctx)
	return exitCode(err, io)
}

func exitCode(err error, io *IOStreams) int {
	if err == nil {
		return exitOK
	}
	var ee exitCodeError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errSilent):
		return exitError
	}
	fmt.Fprintln(io.ErrOut, "error:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitError
}

// exitCodeError ends the command with a code after it has printed its own result.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func newRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "sylk",
		Short: "Sylk: an event-sourced multi-agent runtime",
		Long: `Sylk runs LLM agents and plain tool workflows over an event log.

Every message between you and the agents is an immutable event on an embedded
NATS JetStream stream; all state (sessions, DAG progress, checkpoints) is rebuilt
from it. Any NATS client can read the same subjects.

Start here:
  sylk run examples/build-and-test.yaml   run a workflow of tool nodes (no LLM needed)
  sylk run "add input validation"     plan and run a request (needs an LLM: --llm-base-url, --llm-model)
  sylk serve                          run the server (event log, projections, agents)
  sylk publish --session S1 --type user_input --payload '{"text":"hi"}'
  sylk tail                           watch events live (Ctrl-C to stop)
  sylk schema                         the message types and their JSON Schemas`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return f.configure(cmd)
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
	})
	f.bindGlobalFlags(root)
	for _, c := range commands(f) {
		root.AddCommand(c)
	}
	return root
}

func logLevel(name string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(name))
	if err != nil {
		return l, usagef("--log-level %q: use debug, info, warn or error", name)
	}
	return l, nil
}
