package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// runRequest is `sylk run "REQUEST"`: the request goes to the Guide as
// user_input in a new session (or the one given); the Guide classifies it and
// the Architect plans it; the plan is shown and put to the user; once it is
// approved the DAG runs and is followed like a plan file's.
func runRequest(ctx context.Context, f *cmdutil.Factory, opts *RunOptions) error {
	_, llmErr := f.LLMConfig()
	if llmErr != nil && !errors.Is(llmErr, llm.ErrNotConfigured) {
		return llmErr
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if opts.Session != "" {
		if err := schemas.CheckName("--session", opts.Session); err != nil {
			return cmdutil.UsageError{Err: err}
		}
	}
	srv, started, err := f.Server(ctx)
	if err != nil {
		return err
	}
	if started && llmErr != nil {
		// This command runs the agents, and they have no LLM to plan with.
		return conversation.ErrNeedsLLM(fmt.Sprintf("planning %q", cmdutil.TruncateRunes(opts.Request, 60)))
	}
	if opts.Detach && started {
		return errDetachNeedsServer(f)
	}
	log := events.New(srv.JetStream())
	if err := conversation.RefuseSecrets(ctx, f, log, opts.Session, "the request", opts.Request); err != nil {
		return err
	}
	session := opts.Session
	var submit []*schemas.Envelope
	if session == "" {
		if session, submit, err = conversation.NewSession(f, requestName(opts.Request), wd); err != nil {
			return err
		}
	}
	input, err := conversation.UserEvent(f, session, schemas.TypeUserInput, schemas.UserInput{Text: opts.Request}, nil)
	if err != nil {
		return err
	}
	submit = append(submit, input)
	seqs, err := log.AppendBatch(ctx, submit)
	if err != nil {
		return err
	}
	seq := seqs[len(seqs)-1]
	if opts.Detach {
		out := conversation.Outcome{Session: session, Seq: seq, Request: input.ID}
		if opts.JSON {
			return f.IO.PrintJSON(out)
		}
		fmt.Fprintf(f.IO.Out, "submitted the request to session %s; the plan will wait for you: sylk plan show --session %s\n", session, session)
		return nil
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.ErrOut, "session %s: asking for a plan for %q\n", session, cmdutil.TruncateRunes(opts.Request, 80))
	}
	c := &conversation.Conversation{F: f, Log: log, Session: session, Corr: input.ID, From: seq, Yes: opts.Yes, JSON: opts.JSON,
		Interactive: opts.Interactive}
	return c.Run(ctx)
}

func errDetachNeedsServer(f *cmdutil.Factory) error {
	return cmdutil.Usagef("--detach needs a running 'sylk serve' on %s: this run would stop with the command", f.BrokerOptions().DataDir)
}

// requestName names a session after the first words of its request.
func requestName(request string) string {
	words := strings.Fields(request)
	if len(words) > 6 {
		words = words[:6]
	}
	return cmdutil.TruncateRunes(strings.Join(words, " "), 60)
}
