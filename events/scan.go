package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/schemas"
)

// scanAhead is how many events a scan's consumer hands over ahead of fn.
const scanAhead = 1024

// scanRestarts is how many times in a row a scan starts a new consumer
// without receiving an event before it gives up.
const scanRestarts = 3

// scanHeartbeat is the idle heartbeat of a scan's consumer: a consumer that
// has gone quiet for twice as long is replaced. The server says nothing to a
// push consumer's subscriber when it deletes the consumer; the missing
// heartbeats do. (A variable for tests.)
var scanHeartbeat = 5 * time.Second

// Scan calls fn for each event matching subject from the cursor up to sequence
// to (0: no upper bound), in order, and returns once it has read the last
// matching event the stream held when Scan started. fn's error stops the scan
// and is returned.
//
// A scan reads with an ephemeral push consumer, flow controlled and without
// acks, which it deletes at the end: a bounded read of the whole stream (a
// projection rebuild) runs a third faster than with an ordered pull consumer.
// If the consumer loses events (a gap in its delivery sequence) or vanishes,
// the scan starts a new one after the last event fn was given: no gap, no
// duplicate.
func (l *Log) Scan(ctx context.Context, subject string, from Cursor, to uint64, fn func(*Event) error, opts ...ReadOption) error {
	if from.New {
		return nil
	}
	o := readOptionsOf(opts)
	if o.bodies && subject == broker.StreamSubjects && from.Time.IsZero() {
		return l.scanBodies(ctx, from.Seq, to, func(ev *Event) error {
			if !o.raw {
				ev.Env, ev.Err = schemas.Unmarshal(ev.Data)
			}
			return fn(ev)
		})
	}
	raw := o.raw
	for failures := 0; ; {
		s := &scan{raw: raw, to: to}
		err := l.scanOnce(ctx, subject, from, s, fn)
		if !errors.Is(err, errScanLost) {
			return err
		}
		if s.last > 0 {
			from, failures = Cursor{Seq: s.last + 1}, 0
		} else if failures++; failures >= scanRestarts {
			return fmt.Errorf("read %s: %w", subject, err)
		}
	}
}

// errScanLost: the scan's consumer lost events or went away; a new one
// continues after the last event handed over.
var errScanLost = errors.New("scan consumer lost")

// scan is the state of one consumer's part of a Scan.
type scan struct {
	raw  bool
	to   uint64
	last uint64 // stream sequence of the last event fn was given
	dseq uint64 // delivery sequence of the last message received
	// leaderLast is the last matching sequence the stream's leader holds,
	// asked once (on a cluster) when the consumer first has nothing pending.
	leaderLast  uint64
	askedLeader bool
}

// caughtUp reports whether a scan whose consumer has nothing pending after
// stream sequence read has read every matching event. On one server it has.
// On a cluster the scan's consumer (one replica, placed by the server on any
// member of the stream) counts what is pending in its own member's copy,
// which may still be catching up with the leader (a member just restarted):
// its count reaches 0 early, and the scan would end short without an error.
// So the leader is asked for the last matching sequence, and the scan goes on
// until it has read it; the consumer delivers the rest as its member
// catches up.
func (l *Log) caughtUp(ctx context.Context, subject string, s *scan, read uint64) (bool, error) {
	if !broker.Clustered(l.js) {
		return true, nil
	}
	if !s.askedLeader {
		last, err := l.lastMatching(ctx, subject)
		if err != nil {
			return false, err
		}
		s.leaderLast, s.askedLeader = last, true
	}
	return read >= s.leaderLast || (s.to > 0 && read >= s.to), nil
}

// lastMatching asks the stream's leader for the sequence of the last event
// matching subject (0: none): a member's own copy may lag (broker.LastMsgFor).
func (l *Log) lastMatching(ctx context.Context, subject string) (uint64, error) {
	actx, cancel := context.WithTimeout(ctx, getAttempt)
	defer cancel()
	m, err := broker.LeaderMsg(actx, l.js, broker.Stream, broker.MsgQuery{LastFor: subject})
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case broker.Unanswered(ctx, err):
		return 0, fmt.Errorf("%w: no answer from the stream's leader within %s", errScanLost, getAttempt)
	case err != nil:
		return 0, fmt.Errorf("read %s: the last matching sequence: %w", subject, err)
	}
	return m.Sequence, nil
}

func (l *Log) scanOnce(ctx context.Context, subject string, from Cursor, s *scan, fn func(*Event) error) error {
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     subject,
		DeliverSubject:    l.nc.NewInbox(),
		AckPolicy:         jetstream.AckNonePolicy,
		FlowControl:       true,
		IdleHeartbeat:     scanHeartbeat,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	}
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = from.start()
	// A request sent while a cluster elects a leader (a member just stopped)
	// is never answered: one attempt is bounded, as Get's are, and a new
	// consumer asked for, instead of the read hanging until ctx ends.
	actx, cancel := context.WithTimeout(ctx, getAttempt)
	cons, err := l.js.CreatePushConsumer(actx, broker.Stream, cfg)
	cancel()
	if err != nil {
		if broker.Unanswered(ctx, err) {
			return fmt.Errorf("%w: no answer to the consumer's creation within %s", errScanLost, getAttempt)
		}
		return fmt.Errorf("read %s: %w", subject, err)
	}
	// A bounded read removes its consumer at once rather than leaving it to
	// expire: a reader that polls must not pile up consumers on the stream.
	defer l.js.DeleteConsumer(context.WithoutCancel(ctx), broker.Stream, cons.CachedInfo().Name)
	if cons.CachedInfo().NumPending == 0 {
		if !from.Time.IsZero() {
			return nil
		}
		read := from.Seq
		if read > 0 {
			read--
		}
		if done, err := l.caughtUp(ctx, subject, s, read); done || err != nil {
			return err
		}
	}
	evs := make(chan *Event, scanAhead)
	lost := make(chan error, 1)
	quit := make(chan struct{})
	signal := func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	var seen atomic.Uint64 // messages received, data and control
	sub, err := l.nc.Subscribe(cfg.DeliverSubject, func(m *nats.Msg) {
		seen.Add(1)
		if !strings.HasPrefix(m.Reply, ackPrefix) {
			if err := control(l.nc, m, s.dseq); err != nil {
				signal(err)
			}
			return
		}
		ev, dseq, err := event(m)
		if err != nil {
			signal(err)
			return
		}
		if dseq != s.dseq+1 {
			signal(fmt.Errorf("%w: delivery %d after %d", errScanLost, dseq, s.dseq))
			return
		}
		s.dseq = dseq
		select {
		case evs <- ev:
		case <-quit:
		}
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", subject, err)
	}
	// Flow control bounds what the server sends ahead; the subscription's
	// own limits must not drop what it sends.
	sub.SetPendingLimits(-1, -1)
	defer func() {
		close(quit)
		sub.Unsubscribe()
	}()
	// The server sends a heartbeat when it has nothing to send. Nothing at all
	// for two heartbeats, while fn waits for events, means the consumer is
	// gone.
	beat := time.NewTicker(scanHeartbeat)
	defer beat.Stop()
	var quiet int
	var lastSeen uint64
	for {
		select {
		case ev := <-evs:
			if s.to > 0 && ev.Seq > s.to {
				return nil
			}
			if !s.raw {
				ev.Env, ev.Err = schemas.Unmarshal(ev.Data)
			}
			if err := fn(ev); err != nil {
				return err
			}
			s.last = ev.Seq
			if ev.Seq == s.to {
				return nil
			}
			if ev.Pending == 0 {
				if done, err := l.caughtUp(ctx, subject, s, ev.Seq); done || err != nil {
					return err
				}
			}
		case err := <-lost:
			return err
		case <-beat.C:
			n := seen.Load()
			if n != lastSeen || len(evs) > 0 {
				lastSeen, quiet = n, 0
			} else if quiet++; quiet == 2 {
				return fmt.Errorf("%w: no message or heartbeat for %s", errScanLost, 2*scanHeartbeat)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ackPrefix starts the reply subject of every JetStream message a consumer
// delivers; control messages (flow control, heartbeats, status) have none.
const ackPrefix = "$JS.ACK."

// control answers a push consumer's control message: a flow control request
// or a stalled consumer's heartbeat wants a reply; a deleted consumer is lost.
// A heartbeat names the last delivery the consumer sent: beyond dseq, the last
// one received, deliveries were lost on the way, and with nothing after them
// to show the gap the scan would wait on a live consumer until its caller's
// deadline.
func control(nc *nats.Conn, m *nats.Msg, dseq uint64) error {
	switch m.Header.Get("Status") {
	case "100":
		if m.Reply != "" { // flow control request
			return m.Respond(nil)
		}
		if sent, err := strconv.ParseUint(m.Header.Get("Nats-Last-Consumer"), 10, 64); err == nil && sent > dseq {
			return fmt.Errorf("%w: the consumer sent delivery %d, the last received is %d", errScanLost, sent, dseq)
		}
		if stalled := m.Header.Get("Nats-Consumer-Stalled"); stalled != "" {
			return nc.Publish(stalled, nil)
		}
		return nil
	case "409":
		return fmt.Errorf("%w: %s", errScanLost, m.Header.Get("Description"))
	}
	return nil
}

// event builds the undecoded Event of a scan's message and returns its
// delivery sequence, from the message's ack subject. It runs on the
// subscription's goroutine; decoding is left to the scan's, so the two share
// the work.
func event(m *nats.Msg) (*Event, uint64, error) {
	md, err := ackMetadata(m.Reply)
	if err != nil {
		return nil, 0, err
	}
	return &Event{Seq: md.sseq, Subject: m.Subject, Time: md.time, Data: m.Data, Header: m.Header, Pending: md.pending}, md.dseq, nil
}

// ackMeta is what a message's ack subject says of it.
type ackMeta struct {
	sseq, dseq, pending uint64
	time                time.Time
}

// ackMetadata reads an ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.
// <stream seq>.<delivery seq>.<time>.<pending>, or with a domain and an
// account hash after $JS.ACK and a token at the end (11 or 12 tokens).
func ackMetadata(reply string) (ackMeta, error) {
	var tok [12]string
	n := 0
	for rest, more := reply, true; more; n++ {
		if n == len(tok) {
			return ackMeta{}, fmt.Errorf("ack subject %q: too many tokens", reply)
		}
		tok[n], rest, more = strings.Cut(rest, ".")
	}
	var at int // the token of <delivered>
	switch {
	case n == 9:
		at = 4
	case n >= 11:
		at = 6
	default:
		return ackMeta{}, fmt.Errorf("ack subject %q: %d tokens", reply, n)
	}
	var v [4]uint64 // stream seq, delivery seq, time, pending
	for i := range v {
		x, err := strconv.ParseUint(tok[at+1+i], 10, 64)
		if err != nil {
			return ackMeta{}, fmt.Errorf("ack subject %q: %w", reply, err)
		}
		v[i] = x
	}
	return ackMeta{sseq: v[0], dseq: v[1], time: time.Unix(0, int64(v[2])), pending: v[3]}, nil
}
