// Package conversation follows what a command submitted to the agents: a
// request's questions and plans, put to the user, then the DAG's run until it
// ends; and the events from the user that start and answer them.
package conversation

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// StdinTerminal reports whether in is a terminal a question can be asked on.
func StdinTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// ErrNeedsLLM is the fail-fast answer to a request with no LLM to plan it.
func ErrNeedsLLM(what string) error {
	return cmdutil.UsageError{Err: fmt.Errorf("%s needs an LLM, and %w: %s", what, llm.ErrNotConfigured, llm.Hint)}
}

// UserEvent is an event from the user in session, following parent when
// there is one (its correlation, so the answers stay in one thread).
func UserEvent(f *cmdutil.Factory, session string, t schemas.Type, p any, parent *schemas.Envelope) (*schemas.Envelope, error) {
	return schemas.NewUserEvent(t, session, f.Now(), p, parent)
}

// NewSession returns a fresh session id and the events that create it and make
// it active, with its work directory.
func NewSession(f *cmdutil.Factory, name, workDir string) (string, []*schemas.Envelope, error) {
	session := NewSessionID()
	created, err := UserEvent(f, session, schemas.TypeSessionCreate, schemas.SessionCreate{Name: name, Config: schemas.SessionConfig{WorkDir: workDir}}, nil)
	if err != nil {
		return "", nil, err
	}
	resumed, err := UserEvent(f, session, schemas.TypeSessionResume, schemas.SessionResume{Reason: "sylk run"}, created)
	if err != nil {
		return "", nil, err
	}
	return session, []*schemas.Envelope{created, resumed}, nil
}

// Conversation follows one request through the agents: questions, plans,
// approval, then the DAG, until it ends or waits on the user.
type Conversation struct {
	F       *cmdutil.Factory
	Log     *events.Log
	Session string
	// Corr is the request's correlation id: everything that follows from it
	// carries it. From is the stream sequence to follow from.
	Corr string
	From uint64
	// Yes approves plans without asking; Interactive asks on the terminal;
	// JSON prints the outcome as JSON.
	Yes, Interactive, JSON bool
	// Approved, when set, is a plan approved already: its DAG is followed.
	Approved *schemas.PlanResponse

	lines *lineReader
	view  *RunView
	dagID string
}

// Ways a conversation ends besides the DAG's outcome.
const (
	waitingPlan     = "plan_approval"
	waitingQuestion = "clarification"
)

func (c *Conversation) out() *cmdutil.IOStreams { return c.F.IO }

// say prints what the user reads about the conversation: on stdout, or on
// stderr with --json so stdout holds only the JSON outcome.
func (c *Conversation) say(format string, args ...any) {
	w := c.F.IO.Out
	if c.JSON {
		w = c.F.IO.ErrOut
	}
	fmt.Fprintf(w, format, args...)
}

// Run follows the conversation until the DAG ends or something waits on the
// user.
func (c *Conversation) Run(ctx context.Context) error {
	if c.Approved != nil {
		c.start(c.Approved)
	}
	tail, err := c.Log.Tail(ctx, events.Filter{Session: c.Session}.Subject(), events.Cursor{Seq: c.From})
	if err != nil {
		return err
	}
	defer tail.Stop()
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(c.out().ErrOut, "\nstopped watching; the work goes on if a server runs: sylk tail --session %s\n", c.Session)
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
func (c *Conversation) ours(env *schemas.Envelope) bool {
	return env.CorrelationID == c.Corr || env.ParentID == c.Corr || env.ID == c.Corr
}

// apply handles one event of the session; done ends the conversation.
func (c *Conversation) apply(ctx context.Context, env *schemas.Envelope) (done bool, err error) {
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
		return c.notice(env, p)
	case schemas.TypeUserResponse:
		p, err := schemas.PayloadAs[schemas.UserResponse](env)
		if err != nil {
			return true, err
		}
		c.say("%s: %s\n", env.Source, p.Text)
		return true, nil
	case schemas.TypeDeadLetter:
		c.deadLetter(env)
		return true, cmdutil.ErrSilent
	case schemas.TypeLLMRequest:
		// A model can take a while: say who is waiting for it.
		if p, err := schemas.PayloadAs[schemas.LLMRequest](env); err == nil && !c.JSON {
			fmt.Fprintf(c.out().ErrOut, "%s is asking %s...\n", env.Source, p.Model)
		}
	}
	return false, nil
}

// notice ends the conversation before a DAG runs: an agent could not go on.
// notice shows a notice and says whether it ends the conversation: an
// advisory one does not (the work goes on); any other answers the request,
// which failed unless the notice is information (a plan rejected, a request
// that needs nothing more).
func (c *Conversation) notice(env *schemas.Envelope, n *schemas.Notice) (bool, error) {
	fmt.Fprintf(c.out().ErrOut, "%s (%s): %s\n", n.Level, env.Source, n.Text)
	if n.Hint != "" {
		fmt.Fprintf(c.out().ErrOut, "hint: %s\n", n.Hint)
	}
	switch {
	case n.Advisory:
		return false, nil
	case n.Level == schemas.NoticeInfo:
		return true, nil
	case n.Level == schemas.NoticeError && strings.Contains(n.Text, "needs an LLM"):
		// The server has no LLM: a matter of configuration, like ours.
		return true, cmdutil.ExitCodeError{Code: cmdutil.ExitUsage}
	}
	// An error, or a warning that the request was not done (a plan
	// waiting for approval holds it, an answer nobody asked for).
	return true, cmdutil.ErrSilent
}

func (c *Conversation) deadLetter(env *schemas.Envelope) {
	if p, err := schemas.PayloadAs[schemas.DeadLetter](env); err == nil {
		fmt.Fprintf(c.out().ErrOut, "error: %s gave up on the request: %s (sylk dlq ls)\n", env.Source, p.Reason)
	}
}

// plan shows a plan and puts it to the user.
func (c *Conversation) plan(ctx context.Context, env *schemas.Envelope, p *schemas.PlanResponse) (bool, error) {
	w := c.out().Out
	if c.JSON {
		w = c.out().ErrOut
	}
	render.PrintPlan(w, c.Session, env, p)
	switch {
	case c.Yes:
		if err := c.send(ctx, schemas.TypePlanApproved, schemas.PlanApproved{PlanID: p.PlanID}, env); err != nil {
			return true, err
		}
		c.say("approved (--yes)\n")
		c.start(p)
		return false, nil
	case !c.Interactive:
		return true, c.waiting(waitingPlan, p.PlanID, fmt.Sprintf(
			"the plan waits for your approval (stdin is not a terminal):\n  sylk plan approve --session %s     # run it\n  sylk plan modify --session %s \"what to change\"\n  sylk plan reject --session %s\n",
			c.Session, c.Session, c.Session))
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
			return true, cmdutil.ExitCodeError{Code: cmdutil.ExitFailure}
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
func (c *Conversation) question(ctx context.Context, env *schemas.Envelope, q *schemas.ClarificationRequest) (bool, error) {
	c.say("%s asks: %s\n", render.OrDash(q.Asker), q.Question)
	for _, o := range q.Options {
		c.say("  - %s\n", o)
	}
	if !c.Interactive {
		return true, c.waiting(waitingQuestion, env.ID, fmt.Sprintf(
			"the question waits for your answer (stdin is not a terminal):\n  sylk plan answer --session %s \"your answer\"\n", c.Session))
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
func (c *Conversation) waiting(what, id, how string) error {
	fmt.Fprint(c.out().ErrOut, how)
	if c.JSON {
		return c.out().PrintJSON(Outcome{Session: c.Session, Request: c.Corr, Seq: c.From, Waiting: what, Plan: planIDIf(what, id), Question: questionIDIf(what, id)})
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
func (c *Conversation) send(ctx context.Context, t schemas.Type, p any, env *schemas.Envelope) error {
	e, err := UserEvent(c.F, c.Session, t, p, env)
	if err != nil {
		return err
	}
	_, err = c.Log.Append(ctx, e)
	return err
}

// start follows an approved plan's DAG.
func (c *Conversation) start(p *schemas.PlanResponse) {
	c.dagID = p.DAG.ID
	c.view = NewRunView(c.out(), &p.DAG, c.JSON)
	if !c.JSON {
		fmt.Fprintf(c.out().ErrOut, "running %s: %d nodes, DAG %s, session %s\n", p.DAG.Name, len(p.DAG.Nodes), p.DAG.ID, c.Session)
	}
}

// finish prints the DAG's outcome; the exit code is 0 only if it succeeded.
func (c *Conversation) finish() error {
	return c.view.End(Outcome{Session: c.Session, DAG: c.dagID, Request: c.Corr, Plan: c.dagID, Seq: c.From})
}

// ask prints prompt on stderr and reads one line of stdin.
func (c *Conversation) ask(ctx context.Context, prompt string) (string, error) {
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

func NewSessionID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "s-" + hex.EncodeToString(b)
}
