package agents

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// MetaRoutedBy is the envelope metadata key the Guide sets on the copies it
// routes: the original is the same message, already seen.
const MetaRoutedBy = "routed_by"

// MetaWhatIf marks the events a live re-execution kept as a fork (its value:
// the session re-executed). They were handled in the re-execution and are
// history now: the runners ack them unhandled.
const MetaWhatIf = "what_if"

// Delivery is one message handed to an agent's handler.
type Delivery struct {
	// Env is the decoded envelope.
	Env *schemas.Envelope
	// Seq is its stream sequence.
	Seq uint64
	// Attempt counts deliveries of this message: 1 the first time, more after a
	// retry, a crash or a restart.
	Attempt int
	// Agent is the agent kind handling it.
	Agent string

	runner *Runner

	mu      sync.Mutex
	emitted []*schemas.Envelope
	// results are tool results RunToolLast left to the runner to append.
	results []*schemas.Envelope
}

// Emit queues events the runner appends with the handler's outputs, before
// the ack: the events hooks return around an LLM or tool call. Derive them,
// so a redelivery emits them under the same ids.
func (d *Delivery) Emit(envs ...*schemas.Envelope) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.emitted = append(d.emitted, envs...)
}

func (d *Delivery) takeEmitted() []*schemas.Envelope { return d.take(&d.emitted) }

// take empties one of d's lists and returns what it held.
func (d *Delivery) take(list *[]*schemas.Envelope) []*schemas.Envelope {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := *list
	*list = nil
	return out
}

// deferResult leaves a tool's result to the runner: appended ahead of what
// the handler emits and returns, or on its own if the handler fails.
func (d *Delivery) deferResult(env *schemas.Envelope) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.results = append(d.results, env)
}

func (d *Delivery) takeResults() []*schemas.Envelope { return d.take(&d.results) }

// Now is the runner's clock, for the timestamps of derived events.
func (d *Delivery) Now() time.Time { return d.runner.opts.Now() }

// Log is the event log, for handlers that must append before returning (the
// "started" record of a side effect).
func (d *Delivery) Log() *events.Log { return d.runner.log }

// Derive builds an event caused by this message, from this agent, with an id
// determined by (message, key): handling a redelivered message derives the same
// ids, which the stream drops as duplicates. Keys must be unique among one
// message's outputs; name them for what they are ("dispatch/build/1").
func (d *Delivery) Derive(t schemas.Type, target, key string, payload any) (*schemas.Envelope, error) {
	out, err := d.Env.Derive(t, d.Agent, target, d.Now(), payload)
	if err != nil {
		return nil, err
	}
	out.ID = schemas.DeriveID(d.Env, d.Agent+"/"+key)
	return out, nil
}

// DeriveSession is Derive for an event of another session (the system session,
// or the session a switch leaves), keeping the lineage.
func (d *Delivery) DeriveSession(session string, t schemas.Type, target, key string, payload any) (*schemas.Envelope, error) {
	out, err := d.Derive(t, target, key, payload)
	if err != nil {
		return nil, err
	}
	out.SessionID = session
	return out, nil
}

// AppendNow appends env at once rather than with the handler's outputs: the
// record that must be durable before a side effect starts (an LLM request),
// or the side effect's result that later steps of the same delivery depend
// on. Errors are transient.
func (d *Delivery) AppendNow(ctx context.Context, env *schemas.Envelope) (uint64, error) {
	return d.appendNow(ctx, env)
}

// AppendAllNow is AppendNow for several records at once: appended in
// order, pipelined like a handler's outputs, so they cost one round trip.
// Their ids are derived, so after a failure part-way the redelivery appends
// the missing ones. Errors are transient unless an event is invalid.
func (d *Delivery) AppendAllNow(ctx context.Context, envs ...*schemas.Envelope) error {
	return d.runner.appendOutputs(ctx, envs)
}

// Breaker is the process's circuit breaker for a resource ("llm",
// "subprocess", ...); its transitions are circuit_change events.
func (d *Delivery) Breaker(resource string) *Breaker { return d.runner.breaker(resource) }

// Stopping reports whether the runner is shutting down: a side effect cut off
// now should run again on redelivery rather than be recorded as failed.
func (d *Delivery) Stopping() bool { return d.runner.root != nil && d.runner.root.Err() != nil }

// appendNow appends one event at once (not with the handler's outputs): the
// record that must be durable before a side effect starts.
func (d *Delivery) appendNow(ctx context.Context, env *schemas.Envelope) (uint64, error) {
	seq, err := d.runner.log.Append(ctx, env)
	if err != nil {
		return 0, classifyAppend(fmt.Errorf("record %s: %w", env.Type, err))
	}
	d.runner.noteAppended(seq)
	return seq, nil
}

// Floor is the least sequence projections must have applied for a handler
// to read the message it handles and everything its runner had appended
// before (its own earlier decisions among them).
func (d *Delivery) Floor() uint64 { return max(d.Seq, d.runner.appended.Load()) }
