package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/schemas"
)

// Header names set on every event.
const (
	HeaderMsgID       = jetstream.MsgIDHeader
	HeaderSchema      = "Sylk-Schema"
	HeaderSession     = "Sylk-Session"
	HeaderType        = "Sylk-Type"
	HeaderSource      = "Sylk-Source"
	HeaderTarget      = "Sylk-Target"
	HeaderCorrelation = "Sylk-Correlation"
	HeaderContentType = "Content-Type"
	ContentType       = "application/msgpack"

	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"

	// errCodeBatchDuplicate is nats-server's JSAtomicPublishContainsDuplicateMessageErr.
	errCodeBatchDuplicate jetstream.ErrorCode = 10201
	// errCodeDuplicateInProcess is nats-server's
	// JSStreamDuplicateMessageConflict: a message of the same id is being
	// stored.
	errCodeDuplicateInProcess jetstream.ErrorCode = 10158
)

// MaxBatch is the most events one atomic AppendBatch takes (the server's limit).
const MaxBatch = 1000

// Errors of the event log.
var (
	// ErrDuplicate: a batch held an event whose id the stream already has, so
	// none of it was stored. A single Append of a known id is not an error.
	ErrDuplicate = errors.New("event already in the log")
	// ErrBatchTooLarge: more than MaxBatch events in one AppendBatch.
	ErrBatchTooLarge = errors.New("batch too large")
)

// Log appends to and reads from the SYLK stream.
type Log struct {
	js jetstream.JetStream
	nc *nats.Conn
}

// New returns the event log on js.
func New(js jetstream.JetStream) *Log {
	return &Log{js: js, nc: js.Conn()}
}

// Message builds the NATS message of a validated-or-not envelope: it validates
// env, encodes it and sets the subject and headers.
func Message(env *schemas.Envelope) (*nats.Msg, error) {
	body, err := schemas.Marshal(env)
	if err != nil {
		return nil, err
	}
	target := env.Target
	if target == "" {
		target = Unaddressed
	}
	// One backing array for the header values: eight small slices would be
	// eight allocations on every append.
	vals := [...]string{env.ID, strconv.Itoa(env.Schema), env.SessionID, string(env.Type), env.Source, target, ContentType, env.CorrelationID}
	h := make(nats.Header, len(vals))
	for i, k := range [...]string{HeaderMsgID, HeaderSchema, HeaderSession, HeaderType, HeaderSource, HeaderTarget, HeaderContentType, HeaderCorrelation} {
		if vals[i] != "" {
			h[k] = vals[i : i+1 : i+1]
		}
	}
	m := &nats.Msg{Subject: Subject(env), Data: body, Header: h}
	return m, nil
}

// Append validates env and appends it, returning its stream sequence. Appending
// an id the stream already holds (within the duplicate window) stores nothing and
// returns the sequence of the first copy.
func (l *Log) Append(ctx context.Context, env *schemas.Envelope) (uint64, error) {
	m, err := Message(env)
	if err != nil {
		return 0, err
	}
	return l.publish(ctx, m)
}

// publish sends m until a server stores it (or holds its id already).
func (l *Log) publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	fail := func(err error) (uint64, error) {
		return 0, fmt.Errorf("append %s %s: %w", m.Header.Get(HeaderType), m.Header.Get(HeaderMsgID), quotaFull(err))
	}
	for attempt, waits := 1, 0; ; {
		actx, cancel := context.WithTimeout(ctx, ackWait)
		ack, err := l.js.PublishMsg(actx, m, failover...)
		cancel()
		if err == nil {
			return ack.Sequence, nil
		}
		// An ack lost with a server that died (the client fails over to
		// another) is asked for again with the same message: the stream keeps
		// one copy of a Nats-Msg-Id, so a first copy that was stored is not
		// stored twice. A first copy still being stored (a new leader
		// replicating what the old one took in) is waited for.
		var apiErr *jetstream.APIError
		inProcess := errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeDuplicateInProcess
		if !inProcess && !unanswered(err) {
			return fail(err)
		}
		if inProcess {
			waits++
		} else {
			attempt++
		}
		if waits > inProcessWaits {
			// A leader has held the first copy unstored all this while: it
			// cannot reach a quorum (the minority side of a split, before it
			// steps down). Sent again later, the same id is stored once.
			return fail(errors.Join(err, ErrNoLeader))
		}
		if ctx.Err() != nil || attempt > lostAckRetries {
			return fail(errors.Join(err, ErrNoLeader))
		}
		if inProcess {
			select {
			case <-time.After(inProcessWait):
			case <-ctx.Done():
				return fail(errors.Join(err, ErrNoLeader))
			}
		}
	}
}

// unanswered reports whether a publish got no answer from a stream: none
// came in time, no server had the stream's leader, or the connection it
// went out on was lost (the client reconnects to another server).
func unanswered(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) ||
		errors.Is(err, nats.ErrDisconnected)
}

// ErrNoLeader is wrapped by an append that no server stored: the stream had
// no leader all along, or a leader that could not reach a quorum to store
// it.
var ErrNoLeader = errors.New("the stream has no leader to store it: the server is down, too few cluster members are up, " +
	"or this side of a split cluster is the minority (nothing was stored; try again once the members see each other)")

// failover are the publish options that carry an append over a cluster's
// failover: while the stream has no leader (an election takes a few
// seconds) the publish finds no responder and is sent again.
var failover = []jetstream.PublishOpt{jetstream.WithRetryAttempts(60), jetstream.WithRetryWait(250 * time.Millisecond)}

// An append whose ack does not come within ackWait (the server died with
// it) is sent again, at most lostAckRetries times in all; one whose first
// copy the stream is still storing, after inProcessWait, at most
// inProcessWaits times.
const (
	ackWait        = broker.AckWait
	lostAckRetries = 4
	inProcessWait  = 250 * time.Millisecond
	inProcessWaits = 40
)

// AppendBatch appends envs atomically: all are stored, in order, or none. It
// costs one round trip and, with --sync always, one fsync for the whole batch.
// It returns the stream sequence of each envelope. If any id is already in the
// stream, nothing is stored and the error wraps ErrDuplicate.
func (l *Log) AppendBatch(ctx context.Context, envs []*schemas.Envelope) ([]uint64, error) {
	switch {
	case len(envs) == 0:
		return nil, nil
	case len(envs) > MaxBatch:
		return nil, fmt.Errorf("%w: %d events, at most %d", ErrBatchTooLarge, len(envs), MaxBatch)
	}
	msgs := make([]*nats.Msg, len(envs))
	for i, env := range envs {
		m, err := Message(env)
		if err != nil {
			return nil, fmt.Errorf("batch event %d: %w", i, err)
		}
		msgs[i] = m
	}
	first, err := l.publishBatch(ctx, msgs)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(envs))
	for i := range seqs {
		seqs[i] = first + uint64(i)
	}
	return seqs, nil
}

// publishBatch sends msgs as one atomic batch (ADR-50): every message carries the
// batch id and its position; only the last, marked commit, asks for an ack, and
// the server stores all or nothing. It returns the first message's sequence.
func (l *Log) publishBatch(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	id := nuid.Next()
	for i, m := range msgs {
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := l.nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("append batch: %w", err)
			}
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(headerBatchCommit, "1")
	resp, err := l.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return 0, fmt.Errorf("append batch of %d: %w", len(msgs), err)
	}
	var ack struct {
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
		Batch  string              `json:"batch"`
		Count  int                 `json:"count"`
		Error  *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("append batch: unreadable ack %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		if ack.Error.ErrorCode == errCodeBatchDuplicate {
			return 0, fmt.Errorf("%w: %w", ErrDuplicate, ack.Error)
		}
		return 0, fmt.Errorf("append batch of %d: %w", len(msgs), quotaFull(ack.Error))
	}
	if ack.Stream != broker.Stream || ack.Batch != id || ack.Count != len(msgs) {
		return 0, fmt.Errorf("append batch: ack for %d events of batch %q on %q, sent %d of %q", ack.Count, ack.Batch, ack.Stream, len(msgs), id)
	}
	return ack.Seq - uint64(len(msgs)) + 1, nil
}

// PendingAppend is an AppendAsync whose ack has not been waited for.
type PendingAppend struct {
	f    jetstream.PubAckFuture
	log  *Log
	sent time.Time
}

// Wait returns the event's stream sequence once the stream has stored it.
// An event whose ack has not come ackWait after it was sent is sent again,
// the way Append sends it, with the same message id: the cluster member
// that got it may have died before answering (its stream leader,
// SIGKILLed), and nobody would ever answer that first copy. A JetStream
// context of broker.NewJetStream reports that itself (and forgets the
// pending ack); the timer, a little later, covers one made without it.
func (p PendingAppend) Wait(ctx context.Context) (uint64, error) {
	t := time.NewTimer(time.Until(p.sent.Add(ackWait + lostAckMargin)))
	defer t.Stop()
	select {
	case ack := <-p.f.Ok():
		return ack.Sequence, nil
	case err := <-p.f.Err():
		if !unanswered(err) {
			return 0, fmt.Errorf("append %s: %w", p.f.Msg().Header.Get(HeaderMsgID), quotaFull(err))
		}
	case <-t.C:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return p.log.publish(ctx, p.f.Msg())
}

// lostAckMargin lets the JetStream context's own ack timeout (AckWait after
// the publish) fire before Wait's.
const lostAckMargin = time.Second

// AppendAsync validates env and publishes it without waiting for the stream's
// ack, so many appends share the round trip: the throughput path for producers
// of independent events. Wait on the result, or Flush, before relying on it.
// Unlike AppendBatch it is not atomic, and each event is its own fsync in
// --sync always mode.
func (l *Log) AppendAsync(env *schemas.Envelope) (PendingAppend, error) {
	m, err := Message(env)
	if err != nil {
		return PendingAppend{}, err
	}
	sent := time.Now()
	f, err := l.js.PublishMsgAsync(m, append(failover, jetstream.WithStallWait(asyncStallWait))...)
	if err != nil {
		return PendingAppend{}, fmt.Errorf("append %s %s: %w", env.Type, env.ID, err)
	}
	return PendingAppend{f: f, log: l, sent: sent}, nil
}

// AppendPipelined appends envs in order with AppendAsync, sharing one round
// trip, and waits for every ack; it returns the stream sequence of the last
// (0 for none). Not atomic: a crash in between can keep the first and lose
// the rest, which AppendBatch would not (at the price of a batch's commit).
func (l *Log) AppendPipelined(ctx context.Context, envs []*schemas.Envelope) (uint64, error) {
	pending := make([]PendingAppend, 0, len(envs))
	for _, env := range envs {
		p, err := l.AppendAsync(env)
		if err != nil {
			return 0, err
		}
		pending = append(pending, p)
	}
	var last uint64
	for _, p := range pending {
		seq, err := p.Wait(ctx)
		if err != nil {
			return 0, err
		}
		last = max(last, seq)
	}
	return last, nil
}

// asyncStallWait is how long AppendAsync waits for room when too many appends
// await their acks (a slow disk in --sync always mode).
const asyncStallWait = time.Minute

// Flush waits until every AppendAsync made through this log's JetStream context
// has been acknowledged.
func (l *Log) Flush(ctx context.Context) error {
	select {
	case <-l.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
