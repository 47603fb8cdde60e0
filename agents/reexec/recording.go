// Package reexec re-executes a recorded session against today's agents: it
// feeds the session's inputs (the events that came from outside the agents:
// user input, sessions, plans submitted, plan decisions, answers, signals), in
// order, to a fresh runtime of its own (an embedded server and projections in
// a scratch directory, the current build's agents and configuration), answers
// every tool and LLM call, skill selection and hook decision the agents make
// from the recording by call id (no subprocess runs, hook programs included,
// no request leaves), and compares every event the agents
// produce with the recorded one in the same causal position.
//
// Call ids are derived from the message being handled (schemas.DeriveID,
// tools.CallID), and the inputs are appended with their recorded ids, so an
// agent that does what it did derives the recording's ids and asks for the
// recording's calls. A call the recording lacks, or an LLM request that is
// not the recorded one, is a divergence; with Options.Live it goes out for
// real instead and the run goes on as a what-if.
//
// Pacing: an input is appended once the new run has produced the
// counterpart of every event the recording has before it (so a pause lands
// where it landed), or once the run has been idle for Options.Idle (it
// diverged and will not produce them).
package reexec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Errors of bad requests; each is wrapped with the value that was wrong.
var (
	ErrUnknownSession = errors.New("unknown session")
	ErrPastEnd        = errors.New("sequence past the session's end")
	ErrNoInputs       = errors.New("the session has no inputs")
)

// Agents are the sources of events the agents produce; an event from any
// other source (the user, a script) is an input.
var Agents = []string{"guide", "architect", "orchestrator", "archivalist", "engineer", "inspector", "tester", "librarian", "academic", "supervisor", pipeline.Name}

// callRecords are the events that record a side effect: a re-execution serves
// them instead of producing them. An audit_record comes with a tool's result
// (a file written, a process killed) or a denial: served with it, it is not
// made again.
var callRecords = map[schemas.Type]bool{
	schemas.TypeToolCall: true, schemas.TypeToolResult: true, schemas.TypeAuditRecord: true,
	schemas.TypeLLMRequest: true, schemas.TypeLLMResponse: true, schemas.TypeLLMUsage: true,
	schemas.TypeStreamChunk: true, schemas.TypeSkillsSelected: true, schemas.TypeHookDecision: true,
}

// Kind says what a recorded event is to a re-execution.
type Kind int

// Kinds of recorded events.
const (
	// Output is an event an agent produced: compared.
	Output Kind = iota
	// Input came from outside the agents: fed to the new run.
	Input
	// Call records a side effect: served by call id.
	Call
)

// Recorded is one event of a recording.
type Recorded struct {
	Seq  uint64
	Env  *schemas.Envelope
	Kind Kind
}

// Problem is a recorded event that does not decode (a newer or older schema
// version): reported, not re-executed.
type Problem struct {
	Seq uint64 `json:"seq"`
	Err string `json:"error"`
}

// Recording is a session's recorded history, as re-execution reads it.
type Recording struct {
	Session  string
	Events   []*Recorded
	Problems []Problem
	// Sessions are the sessions the history spans: a fork's ancestors and
	// itself.
	Sessions []string
	// Running: the session had a DAG running when it was read, so the
	// recording is a prefix of a run (re-executed as far as it goes).
	Running bool
	// Prefix: the recording stops before the session's end (Until).
	Prefix bool
	// Handled is, for each agent, the last stream sequence it had handled
	// (its consumer's ack floor) when the recording was read; nil: all. An
	// event the new run's agent produces in reply to a recorded event its
	// recorded counterpart had not handled yet (a 'sylk run' that ended
	// before the Archivalist filed the outcome) is beyond the recording, not
	// a divergence.
	Handled map[string]uint64

	tools    map[string]*schemas.ToolResult
	skills   map[string]*schemas.SkillsSelected
	hooks    map[string]*schemas.HookDecision
	llm      map[string]*schemas.LLMResponse
	requests map[string]*schemas.LLMRequest
	// limits are the max_concurrency each DAG ran under, by DAG id.
	limits map[string]int
}

// Load reads a session's history (through its lineage, for a fork) up to
// until (0: its end) from r.
func Load(ctx context.Context, r projections.Reader, session string, until uint64) (*Recording, error) {
	rec := &Recording{Session: session, tools: map[string]*schemas.ToolResult{}, skills: map[string]*schemas.SkillsSelected{}, hooks: map[string]*schemas.HookDecision{}, llm: map[string]*schemas.LLMResponse{}, requests: map[string]*schemas.LLMRequest{}, limits: map[string]int{}}
	q := projections.LogQuery{Session: session}
	var last uint64
	for {
		page, err := r.SessionLog(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			last = e.Seq
			if until != 0 && e.Seq > until {
				rec.Prefix = true
				continue
			}
			env, err := schemas.Unmarshal(e.Data)
			if err != nil {
				rec.Problems = append(rec.Problems, Problem{Seq: e.Seq, Err: err.Error()})
				continue
			}
			rec.add(e.Seq, env)
		}
		if !page.More {
			break
		}
		q.From = page.Next
	}
	if last == 0 {
		if _, err := r.Session(ctx, session); err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownSession, session, err)
		}
		return nil, fmt.Errorf("%w: session %s has no events", ErrNoInputs, session)
	}
	if until > last {
		return nil, fmt.Errorf("%w: --until %d, but the last event of session %s is seq %d", ErrPastEnd, until, session, last)
	}
	bound := last
	if until != 0 {
		bound = until
	}
	if err := rec.addGlobal(ctx, r, bound); err != nil {
		return nil, err
	}
	if err := rec.addUndecodable(ctx, r, until); err != nil {
		return nil, err
	}
	if len(rec.Inputs()) == 0 {
		return nil, fmt.Errorf("%w: nothing in session %s came from outside the agents (%d events)", ErrNoInputs, session, len(rec.Events))
	}
	if !rec.Prefix {
		dags, err := r.DAGs(ctx, projections.DAGFilter{Session: session, State: projections.DAGRunning})
		if err != nil {
			return nil, err
		}
		rec.Running = len(dags) > 0
	}
	return rec, nil
}

// addUndecodable adds to Problems the session's events up to until (0: all) that
// the projections could not file at all (bytes that are no envelope of this
// build's schema: another version's), as they recorded them.
func (rec *Recording) addUndecodable(ctx context.Context, r projections.Reader, until uint64) error {
	rejected, err := r.Rejections(ctx, projections.RejectionFilter{Projection: projections.Log, Session: rec.Session})
	if err != nil {
		return err
	}
	for _, x := range rejected {
		if until == 0 || x.Seq <= until {
			rec.Problems = append(rec.Problems, Problem{Seq: x.Seq, Err: x.Reason})
		}
	}
	slices.SortFunc(rec.Problems, func(a, b Problem) int { return cmp.Compare(a.Seq, b.Seq) })
	return nil
}

func (rec *Recording) add(seq uint64, env *schemas.Envelope) {
	r := &Recorded{Seq: seq, Env: env, Kind: kindOf(env)}
	rec.Events = append(rec.Events, r)
	if !slices.Contains(rec.Sessions, env.SessionID) {
		rec.Sessions = append(rec.Sessions, env.SessionID)
	}
	if dag, limit, ok := limitOf(env); ok {
		rec.limits[dag] = limit
	}
	switch env.Type {
	case schemas.TypeToolResult:
		if p, err := schemas.PayloadAs[schemas.ToolResult](env); err == nil {
			if _, dup := rec.tools[p.CallID]; !dup {
				rec.tools[p.CallID] = p
			}
		}
	case schemas.TypeSkillsSelected:
		if p, err := schemas.PayloadAs[schemas.SkillsSelected](env); err == nil {
			if _, dup := rec.skills[p.CallID]; !dup {
				rec.skills[p.CallID] = p
			}
		}
	case schemas.TypeHookDecision:
		if p, err := schemas.PayloadAs[schemas.HookDecision](env); err == nil {
			if _, dup := rec.hooks[p.CallID]; !dup {
				rec.hooks[p.CallID] = p
			}
		}
	case schemas.TypeLLMResponse:
		if p, err := schemas.PayloadAs[schemas.LLMResponse](env); err == nil {
			if _, dup := rec.llm[p.CallID]; !dup {
				rec.llm[p.CallID] = p
			}
		}
	case schemas.TypeLLMRequest:
		if p, err := schemas.PayloadAs[schemas.LLMRequest](env); err == nil {
			rec.requests[p.CallID] = p
		}
	}
}

// addGlobal adds the signals of scope all (pause, resume or cancel every
// session) that the user sent while the session's history was recorded, up
// to seq, at their positions: inputs like the session's own. A pause in force
// when the history began comes first. Signals the agents sent themselves (an
// LLM endpoint's rate limit pausing everything) are not inputs: a
// re-execution makes no call that could be limited.
func (rec *Recording) addGlobal(ctx context.Context, r projections.Reader, seq uint64) error {
	if len(rec.Events) == 0 {
		return nil
	}
	first := rec.Events[0].Seq
	var pause *Recorded
	var during []*Recorded
	q := projections.LogQuery{Global: true, Until: seq}
	for {
		page, err := r.SessionLog(ctx, q)
		if err != nil {
			return fmt.Errorf("read the global signals: %w", err)
		}
		for _, e := range page.Entries {
			env, err := schemas.Unmarshal(e.Data)
			if err != nil || kindOf(env) != Input {
				continue
			}
			p, err := schemas.PayloadAs[schemas.Signal](env)
			switch {
			case err != nil:
			case e.Seq > first:
				during = append(during, &Recorded{Seq: e.Seq, Env: env, Kind: Input})
			case p.Action == schemas.SignalPause:
				pause = &Recorded{Seq: e.Seq, Env: env, Kind: Input}
			case p.Action == schemas.SignalResume:
				pause = nil
			}
		}
		if !page.More {
			break
		}
		q.From = page.Next
	}
	if pause != nil {
		during = append([]*Recorded{pause}, during...)
	}
	if len(during) == 0 {
		return nil
	}
	rec.Events = append(rec.Events, during...)
	slices.SortStableFunc(rec.Events, func(a, b *Recorded) int { return cmp.Compare(a.Seq, b.Seq) })
	return nil
}

func kindOf(env *schemas.Envelope) Kind {
	switch {
	case callRecords[env.Type]:
		return Call
	case slices.Contains(Agents, env.Source) || env.Metadata[agents.MetaRoutedBy] != "":
		return Output
	}
	return Input
}

// HandledBy reads how far each agent's consumer had got (see
// Recording.Handled).
func HandledBy(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, name := range Agents {
		c, err := js.Consumer(ctx, broker.Stream, agents.ConsumerName(name))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		out[name] = info.AckFloor.Stream
	}
	return out, nil
}

// Inputs are the recorded inputs, in order.
func (rec *Recording) Inputs() []*Recorded { return rec.of(Input) }

// Outputs are the recorded events of the agents, in order.
func (rec *Recording) Outputs() []*Recorded { return rec.of(Output) }

func (rec *Recording) of(k Kind) []*Recorded {
	var out []*Recorded
	for _, r := range rec.Events {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// Calls counts the recorded tool and LLM calls.
func (rec *Recording) Calls() int { return len(rec.tools) + len(rec.llm) }
