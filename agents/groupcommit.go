package agents

import (
	"cmp"
	"context"
	"sync"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// groupCommit appends the outputs of a runner's concurrent handlers so that
// they share the stream's syncs.
//
// In --sync always mode the stream syncs its file for every message stored
// on its own, so handlers appending each for themselves pay a sync per
// event, and the disk's sync rate, not the CPU, caps the runtime (the bare
// two-hop chain of `sylk bench route` runs at about a third of raw async
// publish). Here a handler whose outputs are ready while an append is in
// flight queues them; the next append takes the whole queue, when it holds
// at least sharedMin handlers' outputs, as one atomic batch, which the server
// stores under a single sync: group commit, as databases do it. A handler
// that finds no append in flight appends its own at once, itself, and leaves
// what was queued meanwhile to a drainer goroutine. A shorter queue takes
// the pipelined path (AppendAsync, each acked): the server stages an atomic
// batch in a store of its own, which costs more than it saves for a few
// handlers' events, and a runner below its disk's sync rate keeps its
// latency.
//
// Only for a stream that syncs every write (Options.GroupCommit): with
// --sync interval the batches' staging is all cost and no sync is saved
// (the routed path's CPU per message tripled).
//
// A batch is all or nothing, so one handler's failure (an event the server
// refuses, or an id the stream holds already: a redelivery after a crash)
// would fail the others': when a shared batch fails, each handler's outputs
// are appended again on their own, and each handler sees its own outcome.
type groupCommit struct {
	log *events.Log
	// shared: group the handlers' outputs; without it each handler's take
	// the pipelined path at once.
	shared bool
	// minShared is the fewest handlers' outputs a shared batch is made of
	// (0: sharedMin); a shorter queue is appended pipelined.
	minShared int

	mu      sync.Mutex
	queue   []*queuedOutputs
	leading bool // an appender goroutine is draining the queue
}

// queuedOutputs is one handler's events waiting in the queue, with the
// context of its append, and once done is closed, the highest sequence they
// were stored at, or why not.
type queuedOutputs struct {
	ctx  context.Context
	envs []*schemas.Envelope
	last uint64
	err  error
	done chan struct{}
}

// append appends envs in order and returns the highest sequence they were
// stored at. Its error is classified (Transient, Permanent).
func (g *groupCommit) append(ctx context.Context, envs []*schemas.Envelope) (uint64, error) {
	if len(envs) == 0 {
		return 0, nil
	}
	if !g.shared {
		return g.pipelined(ctx, envs)
	}
	g.mu.Lock()
	if !g.leading {
		// Nothing in flight: appended at once by this handler, with no
		// handoff to a drainer and back (on a busy machine each costs a
		// wait for a CPU: a pipeline loop's chain of handlers paid it at
		// every step). What others queue meanwhile goes in the next batch.
		g.leading = true
		g.mu.Unlock()
		last, err := g.pipelined(ctx, envs)
		g.mu.Lock()
		if len(g.queue) > 0 {
			go g.drain()
		} else {
			g.leading = false
		}
		g.mu.Unlock()
		return last, err
	}
	q := &queuedOutputs{ctx: ctx, envs: envs, done: make(chan struct{})}
	g.queue = append(g.queue, q) // the append in flight drains it after
	g.mu.Unlock()
	select {
	case <-q.done:
		return q.last, q.err
	case <-ctx.Done():
		// The events may still be stored: the redelivery this leads to
		// finds them there (their ids derive from the input).
		return 0, Transient(ctx.Err(), 0)
	}
}

// drain appends what the queue holds until it is empty, taking at most
// events.MaxBatch events at a time (and a longer list of one handler's alone).
func (g *groupCommit) drain() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.leading = false
			g.mu.Unlock()
			return
		}
		n, size := 1, len(g.queue[0].envs)
		for n < len(g.queue) && size+len(g.queue[n].envs) <= events.MaxBatch {
			size += len(g.queue[n].envs)
			n++
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.commit(batch)
	}
}

// commit appends the batch's outputs, together when there are sharedMin or
// more, and closes each one's done. A shared batch is not bound to any one handler's
// context (a handler cancelled by a signal must not fail the others'
// appends): it has sharedBatchWait, and a handler whose context ends
// meanwhile stops waiting for it.
func (g *groupCommit) commit(batch []*queuedOutputs) {
	defer func() {
		for _, q := range batch {
			close(q.done)
		}
	}()
	if len(batch) >= cmp.Or(g.minShared, sharedMin) {
		var all []*schemas.Envelope
		for _, q := range batch {
			all = append(all, q.envs...)
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), sharedBatchWait)
		seqs, err := g.log.AppendBatch(ctx, all)
		cancel()
		if err == nil {
			i := 0
			for _, q := range batch {
				i += len(q.envs)
				q.last = seqs[i-1]
			}
			return
		}
	}
	// Every handler's events are published before any ack is awaited, so
	// their stores share the server's syncs as far as they can.
	pending := make([][]events.PendingAppend, len(batch))
	for i, q := range batch {
		pending[i], q.err = g.publish(q.envs)
	}
	for i, q := range batch {
		if q.err == nil {
			q.last, q.err = await(q.ctx, pending[i])
		}
	}
}

// sharedMin is the fewest handlers' outputs worth a shared batch. The server
// stages an atomic batch in a store of its own (a directory, a file and two
// syncs), which costs far more than one event's sync: sharing a batch
// whenever two handlers' outputs met made each batch's wait the next one's
// queue, and at a steady 660 routed messages a second (half what the
// machine sustains) every message waited about 13 ms where the bare chain
// waits under 1. A queue this long means the runner is at its disk's sync
// rate, where sharing the syncs pays.
const sharedMin = 8

// sharedBatchWait bounds the wait for a shared batch's ack; past it, each
// handler's outputs are appended again on their own (with the same ids, so
// a batch stored after all is not stored twice).
const sharedBatchWait = broker.AckWait

// pipelined appends envs in order without an atomic batch: each is
// published without waiting for the one before, then every ack is awaited.
// Atomicity is not needed for correctness: outputs have ids derived from
// their input, so after a crash part-way the redelivery appends the missing
// ones and the stream drops the rest as duplicates.
func (g *groupCommit) pipelined(ctx context.Context, envs []*schemas.Envelope) (uint64, error) {
	pending, err := g.publish(envs)
	if err != nil {
		return 0, err
	}
	return await(ctx, pending)
}

// publish publishes envs in order without waiting for their acks.
func (g *groupCommit) publish(envs []*schemas.Envelope) ([]events.PendingAppend, error) {
	pending := make([]events.PendingAppend, 0, len(envs))
	for _, e := range envs {
		p, err := g.log.AppendAsync(e)
		if err != nil {
			return nil, classifyAppend(err)
		}
		pending = append(pending, p)
	}
	return pending, nil
}

// await waits for every ack of pending and returns the highest sequence
// stored.
func await(ctx context.Context, pending []events.PendingAppend) (uint64, error) {
	var last uint64
	for _, p := range pending {
		seq, err := p.Wait(ctx)
		if err != nil {
			return 0, classifyAppend(err)
		}
		last = max(last, seq)
	}
	return last, nil
}
