package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Source is the envelope source of the checkpoints.
const Source = "audit"

// CheckpointSubject is where checkpoints are stored.
var CheckpointSubject = events.Filter{Session: schemas.SystemSession, Source: Source, Target: "user", Type: schemas.TypeAuditCheckpoint}.Subject()

// Signer follows the stream and appends a signed checkpoint each time a
// range of Interval sequences is complete. Its state is the last checkpoint
// in the stream: a restarted signer continues after it, and two signers on
// one stream append each checkpoint once (the append expects the previous
// checkpoint as the subject's last message).
type Signer struct {
	JS       jetstream.JetStream
	Key      ed25519.PrivateKey
	Interval uint64 // DefaultInterval when 0
	Logger   *slog.Logger
}

// Run signs until ctx ends.
func (s *Signer) Run(ctx context.Context) error {
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	for {
		err := s.run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.Logger.Warn("audit signer restarts", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// resume returns where signing continues: the chain and range end of the
// last checkpoint in the stream, and that checkpoint's stream sequence.
func (s *Signer) resume(ctx context.Context) (chain Hash, to, lastSeq uint64, err error) {
	m, err := broker.LastMsgFor(ctx, s.JS, broker.Stream, CheckpointSubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return chain, 0, 0, nil
	}
	if err != nil {
		return chain, 0, 0, err
	}
	env, err := schemas.Unmarshal(m.Data)
	if err != nil {
		return chain, 0, 0, fmt.Errorf("last checkpoint (seq %d): %w", m.Sequence, err)
	}
	cp, err := schemas.PayloadAs[schemas.AuditCheckpoint](env)
	if err != nil {
		return chain, 0, 0, fmt.Errorf("last checkpoint (seq %d): %w", m.Sequence, err)
	}
	c, err := checkCheckpoint(cp, s.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return chain, 0, 0, fmt.Errorf("last checkpoint (seq %d): %w", m.Sequence, err)
	}
	return c.chain, c.to, m.Sequence, nil
}

func (s *Signer) run(ctx context.Context) error {
	chain, to, lastCP, err := s.resume(ctx)
	if err != nil {
		return err
	}
	tail, err := events.New(s.JS).Tail(ctx, events.Prefix+".>", events.Cursor{Seq: to + 1}, events.Raw())
	if err != nil {
		return err
	}
	defer tail.Stop()
	from := to + 1
	leaves := make([]Hash, 0, s.Interval)
	var hasher leafHasher
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			return err
		}
		// A sequence the stream skipped leaves a zero leaf.
		for ev.Seq > from+uint64(len(leaves)) {
			if leaves, chain, from, lastCP, err = s.add(ctx, leaves, Hash{}, chain, from, lastCP, ev.Time); err != nil {
				return err
			}
		}
		leaf := hasher.leaf(ev.Seq, ev.Time, ev.Subject, ev.Header, ev.Data)
		if leaves, chain, from, lastCP, err = s.add(ctx, leaves, leaf, chain, from, lastCP, ev.Time); err != nil {
			return err
		}
	}
}

// add appends leaf to the range; a complete range is signed and appended.
func (s *Signer) add(ctx context.Context, leaves []Hash, leaf, chain Hash, from, lastCP uint64, at time.Time) ([]Hash, Hash, uint64, uint64, error) {
	leaves = append(leaves, leaf)
	if uint64(len(leaves)) < s.Interval {
		return leaves, chain, from, lastCP, nil
	}
	to := from + s.Interval - 1
	cp, next := newCheckpoint(s.Key, from, to, chain, leaves)
	env, err := schemas.New(schemas.TypeAuditCheckpoint, schemas.SystemSession, Source, "user", at, cp)
	if err != nil {
		return nil, chain, from, lastCP, err
	}
	env.ID = schemas.DeriveID(&schemas.Envelope{ID: "audit-" + strconv.FormatUint(to, 10), Timestamp: at}, "checkpoint")
	msg, err := events.Message(env)
	if err != nil {
		return nil, chain, from, lastCP, err
	}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastCP, 10))
	ack, err := s.JS.PublishMsg(ctx, msg)
	if err != nil {
		// Another signer may have appended it: start over from the stream.
		return nil, chain, from, lastCP, fmt.Errorf("append the checkpoint of %d-%d: %w", from, to, err)
	}
	return leaves[:0], next, to + 1, ack.Sequence, nil
}
