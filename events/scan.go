package events

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	raw := readOptionsOf(opts).raw
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
	var oc jetstream.OrderedConsumerConfig
	from.apply(&oc)
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = oc.DeliverPolicy, oc.OptStartSeq, oc.OptStartTime
	cons, err := l.js.CreatePushConsumer(ctx, broker.Stream, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", subject, err)
	}
	// A bounded read removes its consumer at once rather than leaving it to
	// expire: a reader that polls must not pile up consumers on the stream.
	defer l.js.DeleteConsumer(context.WithoutCancel(ctx), broker.Stream, cons.CachedInfo().Name)
	if cons.CachedInfo().NumPending == 0 {
		return nil
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
	cc, err := cons.Consume(func(m jetstream.Msg) {
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
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		signal(fmt.Errorf("%w: %w", errScanLost, err))
	}))
	if err != nil {
		return fmt.Errorf("read %s: %w", subject, err)
	}
	defer func() {
		close(quit)
		cc.Stop()
	}()
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
			if ev.Pending == 0 || ev.Seq == s.to {
				return nil
			}
		case err := <-lost:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// event builds the undecoded Event of a scan's message and returns its
// delivery sequence. It runs on the consumer's goroutine; decoding is left to
// the scan's, so the two share the work.
func event(m jetstream.Msg) (*Event, uint64, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, 0, fmt.Errorf("event metadata: %w", err)
	}
	return eventWith(m, md, true), md.Sequence.Consumer, nil
}
