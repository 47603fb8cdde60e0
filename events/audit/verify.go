package audit

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Problem kinds.
const (
	ProblemGap          = "sequence_gap"       // sequences missing from the stream
	ProblemModified     = "modified"           // a message's bytes differ from its signed leaf
	ProblemInserted     = "inserted"           // a message where the checkpoint recorded none
	ProblemChainBreak   = "chain_break"        // a checkpoint does not continue the one before
	ProblemSignature    = "bad_signature"      // a checkpoint that the audit key did not sign
	ProblemNoCheckpoint = "missing_checkpoint" // a complete range with no checkpoint after it
)

// Problem is one finding of Verify, named by stream sequence.
type Problem struct {
	Seq    uint64 `json:"seq"`
	ToSeq  uint64 `json:"to_seq,omitempty"` // the end of a range (a gap)
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// Report is what Verify found.
type Report struct {
	Valid       bool      `json:"valid"`
	From        uint64    `json:"from"`
	Events      uint64    `json:"events"`
	Checkpoints int       `json:"checkpoints"`
	SignedTo    uint64    `json:"signed_to"` // the last sequence a verified checkpoint covers
	Unsigned    int       `json:"unsigned"`  // events after it, not yet in a checkpoint
	Problems    []Problem `json:"problems"`
}

// Verify replays the stream from sequence from (1 when 0), recomputing every
// leaf and the chain, and checks them against the checkpoints, whose
// signatures must verify with pub. It starts at the checkpoint range holding
// from, trusting the signed checkpoint that ends just before it.
//
// The stream is read on one goroutine; leaves are hashed and checkpoint
// signatures checked by a pool of workers, chunk by chunk; one goroutine
// takes their results in stream order and compares them.
func Verify(ctx context.Context, js jetstream.JetStream, pub ed25519.PublicKey, from, interval uint64) (*Report, error) {
	if interval == 0 {
		interval = DefaultInterval
	}
	if from == 0 {
		from = 1
	}
	v := &verifier{pub: pub, interval: interval, leaves: map[uint64]Hash{}, rep: &Report{Problems: []Problem{}}}
	start, _ := rangeOf(from, interval)
	if start > 1 {
		if err := v.anchor(ctx, js, start-1); err != nil {
			return nil, err
		}
	}
	v.rep.From, v.last = start, start-1
	p := newPipeline(ctx, pub, v)
	err := events.New(js).Scan(ctx, events.Prefix+".>", events.Cursor{Seq: start}, 0, p.add, events.Raw())
	if perr := p.close(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	v.finish()
	return v.rep, nil
}

// chunkEvents is how many events a worker takes at a time: enough that
// handing a chunk over costs little beside hashing it.
const chunkEvents = 256

// chunk is a run of consecutive events and what the workers made of them.
type chunk struct {
	evs    []*events.Event
	leaves []Hash
	cps    []checkpointOf // the checkpoints among evs, in order
	done   chan struct{}
}

// checkpointOf is a checkpoint event, decoded and checked by a worker.
type checkpointOf struct {
	i   int // its index in the chunk
	cp  *schemas.AuditCheckpoint
	c   *checked
	err error // it does not decode (cp nil) or does not verify
}

// pipeline hands chunks to the workers and their results, in stream order,
// to the verifier.
type pipeline struct {
	ctx     context.Context
	cur     *chunk
	work    chan *chunk
	ordered chan *chunk
	workers sync.WaitGroup
	folded  chan struct{}
}

func newPipeline(ctx context.Context, pub ed25519.PublicKey, v *verifier) *pipeline {
	n := max(runtime.GOMAXPROCS(0), 2)
	p := &pipeline{ctx: ctx, work: make(chan *chunk, n), ordered: make(chan *chunk, 2*n), folded: make(chan struct{})}
	for range n {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			var lh leafHasher
			for c := range p.work {
				c.hash(&lh, pub)
			}
		}()
	}
	go func() {
		defer close(p.folded)
		for c := range p.ordered {
			<-c.done
			k := 0
			for i, ev := range c.evs {
				var cp *checkpointOf
				if k < len(c.cps) && c.cps[k].i == i {
					cp = &c.cps[k]
					k++
				}
				v.event(ev, c.leaves[i], cp)
			}
		}
	}()
	return p
}

// add is the scan's callback: it gathers ev into the chunk being filled.
func (p *pipeline) add(ev *events.Event) error {
	if p.cur == nil {
		p.cur = &chunk{evs: make([]*events.Event, 0, chunkEvents), done: make(chan struct{})}
	}
	p.cur.evs = append(p.cur.evs, ev)
	if len(p.cur.evs) < chunkEvents {
		return nil
	}
	return p.send()
}

// send hands the chunk being filled to the workers, after the chunks before
// it in the verifier's queue.
func (p *pipeline) send() error {
	c := p.cur
	p.cur = nil
	select {
	case p.ordered <- c:
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
	select {
	case p.work <- c:
		return nil
	case <-p.ctx.Done():
		c.evs = nil // queued, never hashed: nothing to fold
		close(c.done)
		return p.ctx.Err()
	}
}

// close sends the last chunk and waits until every chunk is folded.
func (p *pipeline) close() error {
	var err error
	if p.cur != nil {
		err = p.send()
	}
	close(p.work)
	p.workers.Wait()
	close(p.ordered)
	<-p.folded
	return err
}

// hash computes the chunk's leaves and checks its checkpoints.
func (c *chunk) hash(lh *leafHasher, pub ed25519.PublicKey) {
	defer close(c.done)
	c.leaves = make([]Hash, len(c.evs))
	for i, ev := range c.evs {
		c.leaves[i] = lh.leaf(ev.Seq, ev.Time, ev.Subject, ev.Header, ev.Data)
		if ev.Subject != CheckpointSubject {
			continue
		}
		cp := checkpointOf{i: i}
		env, err := schemas.Unmarshal(ev.Data)
		if err == nil {
			cp.cp, err = schemas.PayloadAs[schemas.AuditCheckpoint](env)
		}
		if err != nil {
			cp.cp, cp.err = nil, err
		} else {
			cp.c, cp.err = checkCheckpoint(cp.cp, pub)
		}
		c.cps = append(c.cps, cp)
	}
}

type verifier struct {
	pub      ed25519.PublicKey
	interval uint64
	rep      *Report
	last     uint64          // the last sequence read
	leaves   map[uint64]Hash // computed leaves not yet checked against a checkpoint
	prev     *checked        // the last verified checkpoint
}

// anchor finds the checkpoint ending at to and starts the chain from it.
func (v *verifier) anchor(ctx context.Context, js jetstream.JetStream, to uint64) error {
	return events.New(js).Scan(ctx, CheckpointSubject, events.Cursor{Seq: to + 1}, 0, func(ev *events.Event) error {
		if v.prev != nil || ev.Env == nil {
			return nil
		}
		cp, err := schemas.PayloadAs[schemas.AuditCheckpoint](ev.Env)
		if err != nil || cp.ToSeq != to {
			return nil
		}
		c, err := checkCheckpoint(cp, v.pub)
		if err != nil {
			return fmt.Errorf("the checkpoint of %d-%d (seq %d), where --from starts, does not verify: %w", cp.FromSeq, cp.ToSeq, ev.Seq, err)
		}
		v.prev = c
		return nil
	})
}

func (v *verifier) problem(seq, to uint64, kind, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, Problem{Seq: seq, ToSeq: to, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// event takes ev, its leaf and, when it is a checkpoint, what a worker made
// of it, in stream order.
func (v *verifier) event(ev *events.Event, leaf Hash, cp *checkpointOf) {
	v.rep.Events++
	if ev.Seq != v.last+1 {
		v.problem(v.last+1, ev.Seq-1, ProblemGap, "sequences %d to %d are missing from the stream", v.last+1, ev.Seq-1)
	}
	v.last = ev.Seq
	v.leaves[ev.Seq] = leaf
	switch {
	case cp == nil:
	case cp.cp == nil:
		v.problem(ev.Seq, 0, ProblemSignature, "a checkpoint that does not decode: %v", cp.err)
	case v.prev != nil && cp.cp.ToSeq <= v.prev.to:
		// A range verified already (a second signer's copy).
	case cp.err != nil:
		v.problem(ev.Seq, 0, ProblemSignature, "the checkpoint of %d-%d: %v", cp.cp.FromSeq, cp.cp.ToSeq, cp.err)
	default:
		v.check(ev.Seq, cp.c)
	}
}

// check compares a verified checkpoint, stored at seq, with what the stream
// holds.
func (v *verifier) check(seq uint64, c *checked) {
	v.rep.Checkpoints++
	switch {
	case v.prev == nil && c.from != 1 && c.from != v.rep.From:
		v.problem(v.rep.From, c.from-1, ProblemNoCheckpoint, "no checkpoint covers %d-%d", v.rep.From, c.from-1)
	case v.prev != nil && c.from != v.prev.to+1:
		v.problem(v.prev.to+1, c.from-1, ProblemNoCheckpoint, "no checkpoint covers %d-%d", v.prev.to+1, c.from-1)
	case v.prev != nil && c.prev != v.prev.chain:
		v.problem(c.from, 0, ProblemChainBreak, "the checkpoint of %d-%d (seq %d) does not continue the chain of %d-%d", c.from, c.to, seq, v.prev.from, v.prev.to)
	case v.prev == nil && c.from == 1 && c.prev != (Hash{}):
		v.problem(c.from, 0, ProblemChainBreak, "the first checkpoint (seq %d) does not start the chain", seq)
	}
	for i, want := range c.leaves {
		s := c.from + uint64(i)
		got, ok := v.leaves[s]
		switch {
		case !ok:
			// Missing: reported as a gap when it was read past.
		case want == (Hash{}):
			v.problem(s, 0, ProblemInserted, "seq %d holds a message; the checkpoint at seq %d recorded none", s, seq)
		case got != want:
			v.problem(s, 0, ProblemModified, "the message at seq %d is not the one the checkpoint at seq %d signed", s, seq)
		}
		delete(v.leaves, s)
	}
	v.prev = c
	v.rep.SignedTo = c.to
}

// finish reports complete ranges no checkpoint covered and counts the rest.
func (v *verifier) finish() {
	next := v.rep.From
	if v.prev != nil {
		next = v.prev.to + 1
	}
	// A range that ended well before the stream's end should have been signed
	// by now; the last complete one may still be on its way.
	if _, to := rangeOf(max(next, 1), v.interval); to+v.interval < v.last && v.last > 0 {
		v.problem(next, to, ProblemNoCheckpoint, "no checkpoint covers %d-%d", next, to)
	}
	v.rep.Unsigned = len(v.leaves)
	v.rep.Valid = len(v.rep.Problems) == 0
}
