package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
)

// Bodies hands over only what a fold of the whole stream needs: Seq, Data
// and Pending (no Subject, Time or Header), and lets Scan read the stream with
// batched direct gets whose messages carry no headers. A push consumer's
// message costs the server a delivery, an ack subject and flow-control
// accounting, and the client a parse of every header into a map; a bodies
// read of a million events takes about a third less CPU. It applies to a Scan
// of the whole stream (subject broker.StreamSubjects from a sequence); any
// other Scan reads as usual. The *Event fn is given is valid only until fn
// returns (the next event is read into it); its Data stays valid.
func Bodies() ReadOption { return func(o *readOptions) { o.bodies = true } }

// Bodies read sizes: one direct get answers at most bodiesBatch messages or
// bodiesBytes bytes, and the next request goes out while the caller folds
// the last answer, so at most two answers are held.
const (
	bodiesBatch = 4096
	bodiesBytes = 8 << 20
)

// directGetRequest is JetStream's batched direct get (nats-server's
// JSApiMsgGetRequest).
type directGetRequest struct {
	Seq       uint64 `json:"seq"`
	Batch     int    `json:"batch"`
	MaxBytes  int    `json:"max_bytes"`
	NoHeaders bool   `json:"no_hdr,omitempty"`
}

// bodiesAnswer is one direct get's answer: the messages, then the end of the
// batch with the last sequence sent.
type bodiesAnswer struct {
	req  directGetRequest
	msgs []*nats.Msg
	last uint64 // Nats-Last-Sequence of the end-of-batch status
	err  error
}

// scanBodies reads the stream from seq from to to (0: the last event the
// stream holds now) with batched direct gets, in order, handing each event to
// fn. Messages without headers say nothing of their sequence: an answer whose
// count does not span exactly from its first to its last sequence (the
// stream lost messages in between) is asked again with headers, which name
// each message's sequence.
func (l *Log) scanBodies(ctx context.Context, from, to uint64, fn func(*Event) error) error {
	end, err := l.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("read the stream: %w", err)
	}
	if to > 0 && to < end {
		end = to
	}
	from = max(from, 1)
	if from > end {
		return nil
	}
	r := &bodiesReader{l: l, end: end, subject: broker.APISubject(l.js, "DIRECT.GET.", broker.Stream), inbox: l.nc.NewInbox(),
		answers: make(chan bodiesAnswer, 2), requests: make(chan directGetRequest, 2), quit: make(chan struct{})}
	sub, err := l.nc.Subscribe(r.inbox, r.receive)
	if err != nil {
		return fmt.Errorf("read the stream: %w", err)
	}
	defer func() {
		close(r.quit) // a callback blocked on an answer nobody reads returns
		sub.Unsubscribe()
	}()
	// The requests bound what the answers hold: nothing may be dropped.
	sub.SetPendingLimits(-1, -1)
	if err := r.send(from, false); err != nil {
		return err
	}
	for {
		var a bodiesAnswer
		select {
		case a = <-r.answers:
		case <-ctx.Done():
			return ctx.Err()
		}
		if a.err != nil {
			return fmt.Errorf("read the stream: %w", a.err)
		}
		var evs []*Event
		if len(a.msgs) == 0 {
			// Nothing at or after the request's sequence: the rest was
			// deleted (a purge keeps the last sequence), as a consumer would
			// find; or, on a cluster, the member that answered lags the
			// leader, which is asked (see broker.GetMsg).
			if evs, err = r.fromLeader(ctx, a.req.Seq); evs == nil || err != nil {
				return err
			}
		} else if evs, err = r.numbered(a); err != nil {
			return fmt.Errorf("read the stream: %w", err)
		}
		if evs == nil { // gaps: ask again, with headers
			if err := r.send(a.req.Seq, true); err != nil {
				return err
			}
			continue
		}
		last := evs[len(evs)-1].Seq
		if last < end {
			// The server works on the next answer while fn folds this one.
			if err := r.send(last+1, false); err != nil {
				return err
			}
		}
		for _, ev := range evs {
			if ev.Seq > end {
				return nil
			}
			ev.Pending = end - ev.Seq
			if err := fn(ev); err != nil {
				return err
			}
		}
		if last >= end {
			return nil
		}
	}
}

// bodiesReader is one bodies read's requests and their answers.
type bodiesReader struct {
	l              *Log
	end            uint64
	subject, inbox string
	answers        chan bodiesAnswer
	// requests holds the sent requests in order; the subscription's callback
	// takes the one an answer belongs to (answers complete one at a time).
	requests chan directGetRequest
	quit     chan struct{}
	cur      bodiesAnswer // the answer being received (the callback's own)
	// evs and ptrs hold the events of the answer being handed over, reused
	// from one answer to the next (see numbered).
	evs  []Event
	ptrs []*Event
}

func (r *bodiesReader) send(seq uint64, headers bool) error {
	req := directGetRequest{Seq: seq, Batch: int(min(bodiesBatch, r.end-seq+1)), MaxBytes: bodiesBytes, NoHeaders: !headers}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r.requests <- req
	if err := r.l.nc.PublishRequest(r.subject, r.inbox, body); err != nil {
		return fmt.Errorf("read the stream: %w", err)
	}
	return nil
}

// receive runs on the subscription's goroutine, in the answers' order.
func (r *bodiesReader) receive(m *nats.Msg) {
	c := &r.cur
	if c.req.Batch == 0 {
		c.req = <-r.requests
		c.msgs = make([]*nats.Msg, 0, c.req.Batch)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
		c.msgs = append(c.msgs, m)
		return
	case "204": // end of batch
		c.last, c.err = strconv.ParseUint(m.Header.Get("Nats-Last-Sequence"), 10, 64)
	case "404": // nothing at or after the sequence
		c.last = c.req.Seq - 1
	default:
		c.err = fmt.Errorf("direct get from seq %d: status %s %s", c.req.Seq, status, m.Header.Get("Description"))
	}
	select {
	case r.answers <- *c:
	case <-r.quit:
	}
	r.cur = bodiesAnswer{}
}

// numbered gives an answer's messages their sequences: counted from the
// request's when they fill the span up to the last one sent, read from their
// headers when the answer has them. nil means a headerless answer with gaps.
// The events are the reader's, rewritten for the next answer: a whole
// stream's fold reads a million of them.
func (r *bodiesReader) numbered(a bodiesAnswer) ([]*Event, error) {
	if cap(r.evs) < len(a.msgs) {
		r.evs, r.ptrs = make([]Event, len(a.msgs)), make([]*Event, len(a.msgs))
	}
	evs, out := r.evs[:len(a.msgs)], r.ptrs[:len(a.msgs)]
	if a.req.NoHeaders {
		first := a.req.Seq
		if a.last < first || a.last-first+1 != uint64(len(a.msgs)) {
			return nil, nil
		}
		for i, m := range a.msgs {
			evs[i] = Event{Seq: first + uint64(i), Data: m.Data}
			out[i] = &evs[i]
		}
		return out, nil
	}
	for i, m := range a.msgs {
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("direct get from seq %d: message %d: %w", a.req.Seq, i, err)
		}
		evs[i] = Event{Seq: seq, Data: m.Data, Header: m.Header}
		out[i] = &evs[i]
	}
	return out, nil
}

// fromLeader is the event at or after seq as the stream's leader has it,
// when a member's direct get found nothing there: nil when the stream has
// none (always, on one server).
func (r *bodiesReader) fromLeader(ctx context.Context, seq uint64) ([]*Event, error) {
	if !broker.Clustered(r.l.js) {
		return nil, nil
	}
	actx, cancel := context.WithTimeout(ctx, getAttempt)
	defer cancel()
	m, err := broker.LeaderMsg(actx, r.l.js, broker.Stream, broker.MsgQuery{Seq: seq, NextFor: broker.StreamSubjects})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stream: %w", err)
	}
	return []*Event{{Seq: m.Sequence, Data: m.Data, Header: m.Header}}, nil
}
