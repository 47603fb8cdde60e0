package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// isPlanPath says whether run's argument names a plan file rather than a
// request in plain words: "-" (stdin), or one word ending in .yaml, .yml or
// .json. A missing plan file is then an error, not a request.
func isPlanPath(arg string) bool {
	if arg == "-" {
		return true
	}
	if strings.ContainsAny(arg, " \t\n") {
		return false
	}
	switch strings.ToLower(filepath.Ext(arg)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// stdinTerminal reports whether in is a terminal a question can be asked on.
func stdinTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// errNeedsLLM is the fail-fast answer to a request with no LLM to plan it.
func errNeedsLLM(what string) error {
	return usageError{fmt.Errorf("%s needs an LLM, and %w: %s", what, llm.ErrNotConfigured, llm.Hint)}
}

// runRequest is `sylk run "REQUEST"`: the request goes to the Guide as
// user_input in a new session (or the one given); the Guide classifies it and
// the Architect plans it; the plan is shown and put to the user; once it is
// approved the DAG runs and is followed like a plan file's.
func runRequest(ctx context.Context, f *Factory, opts *RunOptions) error {
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
			return usageError{err}
		}
	}
	srv, started, err := f.Server(ctx)
	if err != nil {
		return err
	}
	if started && llmErr != nil {
		// This command runs the agents, and they have no LLM to plan with.
		return errNeedsLLM(fmt.Sprintf("planning %q", truncateRunes(opts.Request, 60)))
	}
	if opts.Detach && started {
		return errDetachNeedsServer(f)
	}
	log := events.New(srv.JetStream())
	session := opts.Session
	var submit []*schemas.Envelope
	if session == "" {
		if session, submit, err = newSession(f, requestName(opts.Request), wd); err != nil {
			return err
		}
	}
	input, err := userEvent(f, session, schemas.TypeUserInput, schemas.UserInput{Text: opts.Request}, nil)
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
		out := runOutcome{Session: session, Seq: seq, Request: input.ID}
		if opts.JSON {
			return f.IO.printJSON(out)
		}
		fmt.Fprintf(f.IO.Out, "submitted the request to session %s; the plan will wait for you: sylk plan show --session %s\n", session, session)
		return nil
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.ErrOut, "session %s: asking for a plan for %q\n", session, truncateRunes(opts.Request, 80))
	}
	c := &conversation{f: f, log: log, session: session, corr: input.ID, from: seq, yes: opts.Yes, json: opts.JSON,
		interactive: opts.Interactive}
	return c.run(ctx)
}

// userEvent is an event from the user in session, following parent when
// there is one (its correlation, so the answers stay in one thread).
func userEvent(f *Factory, session string, t schemas.Type, p any, parent *schemas.Envelope) (*schemas.Envelope, error) {
	env, err := schemas.New(t, session, "user", "", f.Now(), p)
	if err != nil {
		return nil, err
	}
	env.Priority = schemas.PriorityUserInteractive
	if parent != nil {
		env.ParentID = parent.ID
		env.CorrelationID = parent.CorrelationID
		if env.CorrelationID == "" {
			env.CorrelationID = parent.ID
		}
	}
	return env, nil
}

// newSession returns a fresh session id and the events that create it and make
// it active, with its work directory.
func newSession(f *Factory, name, workDir string) (string, []*schemas.Envelope, error) {
	session := newSessionID()
	created, err := userEvent(f, session, schemas.TypeSessionCreate, schemas.SessionCreate{Name: name, Config: schemas.SessionConfig{WorkDir: workDir}}, nil)
	if err != nil {
		return "", nil, err
	}
	resumed, err := userEvent(f, session, schemas.TypeSessionResume, schemas.SessionResume{Reason: "sylk run"}, created)
	if err != nil {
		return "", nil, err
	}
	return session, []*schemas.Envelope{created, resumed}, nil
}

func errDetachNeedsServer(f *Factory) error {
	return usagef("--detach needs a running 'sylk serve' on %s: this run would stop with the command", f.BrokerOptions().DataDir)
}

// requestName names a session after the first words of its request.
func requestName(request string) string {
	words := strings.Fields(request)
	if len(words) > 6 {
		words = words[:6]
	}
	return truncateRunes(strings.Join(words, " "), 60)
}

// conversation follows one request through the agents: questions, plans,
// approval, then the DAG, until it ends or waits on the user.
type conversation struct {
	f       *Factory
	log     *events.Log
	session string
	// corr is the request's correlation id: everything that follows from it
	// carries it.
	corr string
	from uint64
	// yes approves plans without asking; interactive asks on the terminal.
	yes, interactive, json bool
	// approved, when set, is a plan approved already: its DAG is followed.
	approved *schemas.PlanResponse

	lines *lineReader
	view  *runView
	dagID string
}

// Ways a conversation ends besides the DAG's outcome.
const (
	waitingPlan     = "plan_approval"
	waitingQuestion = "clarification"
)

func (c *conversation) out() *IOStreams { return c.f.IO }

// say prints what the user reads about the conversation: on stdout, or on
// stderr with --json so stdout holds only the JSON outcome.
func (c *conversation) say(format string, args ...any) {
	w := c.f.IO.Out
	if c.json {
		w = c.f.IO.ErrOut
	}
	fmt.Fprintf(w, format, args...)
}

func (c *conversation) run(ctx context.Context) error {
	if c.approved != nil {
		c.start(c.approved)
	}
	tail, err := c.log.Tail(ctx, events.Filter{Session: c.session}.Subject(), events.Cursor{Seq: c.from})
	if err != nil {
		return err
	}
	defer tail.Stop()
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(c.out().ErrOut, "\nstopped watching; the work goes on if a server runs: sylk tail --session %s\n", c.session)
			}
			return err
		}
		if ev.Env == nil {
			continue
		}
		done, err := c.apply(ctx, ev.Env)
		if done || err != nil {
			return err
		}
	}
}

// ours says whether env follows from the request.
func (c *conversation) ours(env *schemas.Envelope) bool {
	return env.CorrelationID == c.corr || env.ParentID == c.corr || env.ID == c.corr
}

// apply handles one event of the session; done ends the conversation.
func (c *conversation) apply(ctx context.Context, env *schemas.Envelope) (done bool, err error) {
	if c.view != nil {
		if c.view.apply(env, c.dagID) {
			return true, c.finish()
		}
		if env.Type == schemas.TypeDeadLetter && c.ours(env) {
			c.deadLetter(env)
		}
		return false, nil
	}
	if !c.ours(env) {
		return false, nil
	}
	switch env.Type {
	case schemas.TypePlanResponse:
		p, err := schemas.PayloadAs[schemas.PlanResponse](env)
		if err != nil {
			return true, err
		}
		return c.plan(ctx, env, p)
	case schemas.TypeClarificationRequest:
		p, err := schemas.PayloadAs[schemas.ClarificationRequest](env)
		if err != nil {
			return true, err
		}
		return c.question(ctx, env, p)
	case schemas.TypeNotice:
		p, err := schemas.PayloadAs[schemas.Notice](env)
		if err != nil {
			return true, err
		}
		return true, c.notice(env, p)
	case schemas.TypeUserResponse:
		p, err := schemas.PayloadAs[schemas.UserResponse](env)
		if err != nil {
			return true, err
		}
		c.say("%s: %s\n", env.Source, p.Text)
		return true, nil
	case schemas.TypeDeadLetter:
		c.deadLetter(env)
		return true, errSilent
	case schemas.TypeLLMRequest:
		// A model can take a while: say who is waiting for it.
		if p, err := schemas.PayloadAs[schemas.LLMRequest](env); err == nil && !c.json {
			fmt.Fprintf(c.out().ErrOut, "%s is asking %s...\n", env.Source, p.Model)
		}
	}
	return false, nil
}

// notice ends the conversation before a DAG runs: an agent could not go on.
func (c *conversation) notice(env *schemas.Envelope, n *schemas.Notice) error {
	fmt.Fprintf(c.out().ErrOut, "%s (%s): %s\n", n.Level, env.Source, n.Text)
	if n.Hint != "" {
		fmt.Fprintf(c.out().ErrOut, "hint: %s\n", n.Hint)
	}
	switch {
	case n.Level != schemas.NoticeError:
		return nil
	case strings.Contains(n.Text, "needs an LLM"):
		// The server has no LLM: a matter of configuration, like ours.
		return exitCodeError{exitUsage}
	}
	return errSilent
}

func (c *conversation) deadLetter(env *schemas.Envelope) {
	if p, err := schemas.PayloadAs[schemas.DeadLetter](env); err == nil {
		fmt.Fprintf(c.out().ErrOut, "error: %s gave up on the request: %s (sylk dlq ls)\n", env.Source, p.Reason)
	}
}

// plan shows a plan and puts it to the user.
func (c *conversation) plan(ctx context.Context, env *schemas.Envelope, p *schemas.PlanResponse) (bool, error) {
	w := c.out().Out
	if c.json {
		w = c.out().ErrOut
	}
	printPlan(w, c.session, env, p)
	switch {
	case c.yes:
		if err := c.send(ctx, schemas.TypePlanApproved, schemas.PlanApproved{PlanID: p.PlanID}, env); err != nil {
			return true, err
		}
		c.say("approved (--yes)\n")
		c.start(p)
		return false, nil
	case !c.interactive:
		return true, c.waiting(waitingPlan, p.PlanID, fmt.Sprintf(
			"the plan waits for your approval (stdin is not a terminal):\n  sylk plan approve --session %s     # run it\n  sylk plan modify --session %s \"what to change\"\n  sylk plan reject --session %s\n",
			c.session, c.session, c.session))
	}
	for {
		answer, err := c.ask(ctx, "Approve this plan? [y]es, [n]o (reject), [m]odify: ")
		if err != nil {
			return true, err
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
			if err := c.send(ctx, schemas.TypePlanApproved, schemas.PlanApproved{PlanID: p.PlanID}, env); err != nil {
				return true, err
			}
			c.start(p)
			return false, nil
		case "n", "no", "reject":
			if err := c.send(ctx, schemas.TypePlanModified, schemas.PlanModified{PlanID: p.PlanID, Rejected: true}, env); err != nil {
				return true, err
			}
			fmt.Fprintln(c.out().ErrOut, "plan rejected; nothing was run")
			return true, exitCodeError{exitFailure}
		case "m", "modify":
			feedback, err := c.ask(ctx, "What should change? ")
			if err != nil {
				return true, err
			}
			if strings.TrimSpace(feedback) == "" {
				continue
			}
			if err := c.send(ctx, schemas.TypePlanModified, schemas.PlanModified{PlanID: p.PlanID, Feedback: strings.TrimSpace(feedback)}, env); err != nil {
				return true, err
			}
			fmt.Fprintln(c.out().ErrOut, "asking the Architect for a new plan...")
			return false, nil
		}
	}
}

// question shows a clarification request and sends the user's answer.
func (c *conversation) question(ctx context.Context, env *schemas.Envelope, q *schemas.ClarificationRequest) (bool, error) {
	c.say("%s asks: %s\n", orDash(q.Asker), q.Question)
	for _, o := range q.Options {
		c.say("  - %s\n", o)
	}
	if !c.interactive {
		return true, c.waiting(waitingQuestion, env.ID, fmt.Sprintf(
			"the question waits for your answer (stdin is not a terminal):\n  sylk plan answer --session %s \"your answer\"\n", c.session))
	}
	var answer string
	for strings.TrimSpace(answer) == "" {
		var err error
		if answer, err = c.ask(ctx, "Your answer: "); err != nil {
			return true, err
		}
	}
	if err := c.send(ctx, schemas.TypeClarificationResponse, schemas.ClarificationResponse{Answer: strings.TrimSpace(answer), InReplyTo: env.ID}, env); err != nil {
		return true, err
	}
	fmt.Fprintln(c.out().ErrOut, "planning with your answer...")
	return false, nil
}

// waiting ends the conversation with something for the user to do later.
func (c *conversation) waiting(what, id, how string) error {
	fmt.Fprint(c.out().ErrOut, how)
	if c.json {
		return c.out().printJSON(runOutcome{Session: c.session, Request: c.corr, Seq: c.from, Waiting: what, Plan: planIDIf(what, id), Question: questionIDIf(what, id)})
	}
	return nil
}

func planIDIf(what, id string) string {
	if what == waitingPlan {
		return id
	}
	return ""
}

func questionIDIf(what, id string) string {
	if what == waitingQuestion {
		return id
	}
	return ""
}

// send appends the user's answer to env.
func (c *conversation) send(ctx context.Context, t schemas.Type, p any, env *schemas.Envelope) error {
	e, err := userEvent(c.f, c.session, t, p, env)
	if err != nil {
		return err
	}
	_, err = c.log.Append(ctx, e)
	return err
}

// start follows an approved plan's DAG.
func (c *conversation) start(p *schemas.PlanResponse) {
	c.dagID = p.DAG.ID
	c.view = newRunView(c.out(), &p.DAG, c.json)
	if !c.json {
		fmt.Fprintf(c.out().ErrOut, "running %s: %d nodes, DAG %s, session %s\n", p.DAG.Name, len(p.DAG.Nodes), p.DAG.ID, c.session)
	}
}

// finish prints the DAG's outcome; the exit code is 0 only if it succeeded.
func (c *conversation) finish() error {
	v := c.view
	out := runOutcome{Session: c.session, DAG: c.dagID, Request: c.corr, Plan: c.dagID, Seq: c.from}
	out.Outcome, out.Summary, out.Nodes, out.Problems = v.outcome, v.summary, v.states, v.problems
	out.Succeeded, out.Failed, out.Skipped = v.count(nodeSucceeded), v.count(nodeFailed), v.count(nodeSkipped)
	out.Duration = v.elapsed().Round(time.Millisecond).String()
	if c.json {
		if err := c.out().printJSON(out); err != nil {
			return err
		}
	} else {
		v.finish()
	}
	if out.Outcome != schemas.OutcomeSucceeded {
		return exitCodeError{exitFailure}
	}
	return nil
}

// ask prints prompt on stderr and reads one line of stdin.
func (c *conversation) ask(ctx context.Context, prompt string) (string, error) {
	if c.lines == nil {
		c.lines = newLineReader(c.out().In)
	}
	fmt.Fprint(c.out().ErrOut, prompt)
	return c.lines.next(ctx)
}

// lineReader reads stdin a line at a time without blocking a cancellation:
// Ctrl-C while a question waits ends the command.
type lineReader struct {
	lines chan string
	err   error // set before lines is closed
}

func newLineReader(in io.Reader) *lineReader {
	l := &lineReader{lines: make(chan string)}
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		l.err = sc.Err()
		if l.err == nil {
			l.err = io.EOF
		}
	}()
	return l
}

func (l *lineReader) next(ctx context.Context) (string, error) {
	select {
	case line, ok := <-l.lines:
		if !ok {
			return "", fmt.Errorf("reading the answer: %w", l.err)
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
