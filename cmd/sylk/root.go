package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// run executes the CLI and returns the process exit code. SIGINT and SIGTERM
// cancel the command's context, so deferred shutdown of the broker and stores
// always runs.
func run(args []string, io *cmdutil.IOStreams) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := cmdutil.NewFactory(io)
	root := newRootCmd(f)
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	err := root.ExecuteContext(ctx)
	f.Close(ctx)
	return exitCode(err, io)
}

func exitCode(err error, io *cmdutil.IOStreams) int {
	if err == nil {
		return cmdutil.ExitOK
	}
	var ee cmdutil.ExitCodeError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, cmdutil.ErrSilent):
		return cmdutil.ExitError
	}
	fmt.Fprintln(io.ErrOut, "error:", err)
	var ue cmdutil.UsageError
	if errors.As(err, &ue) {
		return cmdutil.ExitUsage
	}
	return cmdutil.ExitError
}

func newRootCmd(f *cmdutil.Factory) *cobra.Command {
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
			return f.Configure(cmd)
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return cmdutil.UsageError{Err: fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
	})
	f.BindGlobalFlags(root)
	for _, c := range commands(f) {
		root.AddCommand(c)
	}
	return root
}
