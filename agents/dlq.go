package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Headers a dead letter carries beside the original message's own.
const (
	HeaderDLQReason     = "Sylk-Dlq-Reason"
	HeaderDLQConsumer   = "Sylk-Dlq-Consumer"
	HeaderDLQDeliveries = "Sylk-Dlq-Deliveries"
	HeaderDLQStreamSeq  = "Sylk-Dlq-Stream-Seq"
	HeaderDLQSubject    = "Sylk-Dlq-Subject"
)

// deadLetter moves a message the runner gives up on to SYLK_DLQ, with its
// original bytes and headers, the reason, the consumer and the delivery count,
// and appends a dead_letter event so the session's history shows it. The DLQ
// message id is (consumer, stream seq): reporting the same message twice stores
// it once.
func (r *Runner) deadLetter(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, reason string, env *schemas.Envelope) {
	consumer := ConsumerName(r.opts.Agent)
	r.opts.Logger.Warn("dead letter", "agent", r.opts.Agent, "seq", md.Sequence.Stream, "reason", reason)
	if err := publishDeadLetter(ctx, r.js, consumer, msg.Subject(), msg.Headers(), msg.Data(), md.Sequence.Stream, int(md.NumDelivered), reason); err != nil {
		r.opts.Logger.Error("dead letter not stored", "agent", r.opts.Agent, "seq", md.Sequence.Stream, "err", err)
	}
	session := schemas.SystemSession
	parent := &schemas.Envelope{ID: strconv.FormatUint(md.Sequence.Stream, 10), Timestamp: md.Timestamp}
	if env != nil {
		session, parent = env.SessionID, env
	}
	dl, err := schemas.New(schemas.TypeDeadLetter, session, r.opts.Agent, "user", r.opts.Now(), schemas.DeadLetter{
		Consumer: consumer, Reason: reason, StreamSeq: md.Sequence.Stream, Subject: msg.Subject(),
		Deliveries: int(md.NumDelivered), OriginalID: parent.ID,
	})
	if err != nil {
		return
	}
	dl.ID = schemas.DeriveID(parent, "dead_letter/"+consumer)
	if env != nil {
		dl.ParentID, dl.CorrelationID = env.ID, env.CorrelationID
	}
	if _, err := r.log.Append(ctx, dl); err != nil {
		r.opts.Logger.Error("dead_letter event not appended", "agent", r.opts.Agent, "err", err)
	}
	if env != nil {
		r.reportDeadLetter(ctx, &Delivery{Env: env, Seq: md.Sequence.Stream, Attempt: int(md.NumDelivered), Agent: r.opts.Agent, runner: r}, reason)
	}
}

// reportDeadLetter appends what Options.OnDeadLetter makes of a message given
// up on.
func (r *Runner) reportDeadLetter(ctx context.Context, d *Delivery, reason string) {
	if r.opts.OnDeadLetter == nil {
		return
	}
	outs, err := r.opts.OnDeadLetter(d, reason)
	if err == nil {
		err = r.appendOutputs(ctx, outs)
	}
	if err != nil {
		r.opts.Logger.Error("dead letter not reported", "agent", r.opts.Agent, "seq", d.Seq, "err", err)
	}
}

func publishDeadLetter(ctx context.Context, js jetstream.JetStream, consumer, subject string, hdr nats.Header, data []byte, seq uint64, deliveries int, reason string) error {
	m := nats.NewMsg(events.DLQSubject(consumer))
	m.Data = data
	for k, v := range hdr {
		// The original's own JetStream headers (its id, its batch) would
		// apply to this publish: keep Sylk's and the client's only.
		if !strings.HasPrefix(k, "Nats-") {
			m.Header[k] = v
		}
	}
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", consumer, seq))
	m.Header.Set(HeaderDLQReason, truncate(reason, 1024))
	m.Header.Set(HeaderDLQConsumer, consumer)
	m.Header.Set(HeaderDLQDeliveries, strconv.Itoa(deliveries))
	m.Header.Set(HeaderDLQStreamSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(HeaderDLQSubject, subject)
	_, err := js.PublishMsg(ctx, m)
	return err
}

// watchMaxDeliveries dead-letters the messages the server stops delivering on
// its own: deliveries used up by crashes or ack timeouts, which the runner never
// saw fail.
func (r *Runner) watchMaxDeliveries(ctx context.Context) (*nats.Subscription, error) {
	consumer := ConsumerName(r.opts.Agent)
	subject := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", broker.Stream, consumer)
	return r.js.Conn().Subscribe(subject, func(m *nats.Msg) {
		var adv struct {
			StreamSeq  uint64 `json:"stream_seq"`
			Deliveries int    `json:"deliveries"`
		}
		if json.Unmarshal(m.Data, &adv) != nil {
			return
		}
		s, err := r.js.Stream(ctx, broker.Stream)
		if err != nil {
			return
		}
		raw, err := broker.GetMsg(ctx, r.js, s, adv.StreamSeq)
		if err != nil {
			return
		}
		reason := fmt.Sprintf("not acknowledged after %d deliveries (crashes or ack timeouts)", adv.Deliveries)
		if err := publishDeadLetter(ctx, r.js, consumer, raw.Subject, raw.Header, raw.Data, adv.StreamSeq, adv.Deliveries, reason); err != nil {
			r.opts.Logger.Error("dead letter not stored", "agent", r.opts.Agent, "seq", adv.StreamSeq, "err", err)
		}
		// Every process of the agent kind hears the advisory; the reports
		// have derived ids, so the stream keeps one.
		if env, err := schemas.Unmarshal(raw.Data); err == nil {
			r.reportDeadLetter(ctx, &Delivery{Env: env, Seq: adv.StreamSeq, Attempt: adv.Deliveries, Agent: r.opts.Agent, runner: r}, reason)
		}
	})
}

// ErrNoDeadLetter: no dead letter has that id.
var ErrNoDeadLetter = errors.New("no dead letter")

// DeadLetter is one SYLK_DLQ message as `sylk dlq` and the web view show it.
type DeadLetter struct {
	ID         uint64              `json:"id"`
	Time       time.Time           `json:"time"`
	Consumer   string              `json:"consumer"`
	Reason     string              `json:"reason"`
	Deliveries string              `json:"deliveries"`
	StreamSeq  string              `json:"stream_seq"`
	Subject    string              `json:"subject"`
	Type       string              `json:"type,omitempty"`
	Session    string              `json:"session,omitempty"`
	Envelope   *schemas.Envelope   `json:"envelope,omitempty"`
	Invalid    string              `json:"invalid,omitempty"`
	Headers    map[string][]string `json:"headers,omitempty"`
}

// DeadLetterOf reads a SYLK_DLQ message (its headers are not kept: Headers
// is for those who ask).
func DeadLetterOf(m *jetstream.RawStreamMsg) DeadLetter {
	h := m.Header
	dl := DeadLetter{
		ID: m.Sequence, Time: m.Time, Consumer: h.Get(HeaderDLQConsumer), Reason: h.Get(HeaderDLQReason),
		Deliveries: h.Get(HeaderDLQDeliveries), StreamSeq: h.Get(HeaderDLQStreamSeq),
		Subject: h.Get(HeaderDLQSubject), Type: h.Get(events.HeaderType), Session: h.Get(events.HeaderSession),
	}
	if toks := strings.Split(dl.Subject, "."); len(toks) == 6 {
		// Bytes from an outside client carry no Sylk headers: the subject
		// still says where they were going.
		if dl.Session == "" {
			dl.Session = toks[2]
		}
		if dl.Type == "" {
			dl.Type = toks[5]
		}
	}
	env, err := schemas.Unmarshal(m.Data)
	if err != nil {
		dl.Invalid = err.Error()
	} else {
		dl.Envelope = env
	}
	return dl
}

// DeadLetters lists the dead letters, oldest first.
func DeadLetters(ctx context.Context, js jetstream.JetStream) ([]DeadLetter, error) {
	s, err := js.Stream(ctx, broker.DLQStream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	rows := []DeadLetter{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := broker.GetMsg(ctx, js, s, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, DeadLetterOf(m))
	}
	return rows, nil
}

// GetDeadLetter reads dead letter id; an unknown id is ErrNoDeadLetter.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, id uint64) (*jetstream.RawStreamMsg, error) {
	s, err := js.Stream(ctx, broker.DLQStream)
	if err != nil {
		return nil, err
	}
	m, err := broker.GetMsg(ctx, js, s, id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w %d", ErrNoDeadLetter, id)
	}
	return m, err
}

// Resent is where a dead letter went back on the event log.
type Resent struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	// ID is the new envelope's id ("" for bytes that were never one).
	ID string `json:"id,omitempty"`
}

// ResendDeadLetter puts dead letter id back on the event log for its agent:
// a copy of the envelope with a new id, parent_id = the original and one
// more attempt, on the original subject; bytes that were never an envelope
// are republished as they are. The dead letter stays in SYLK_DLQ.
//
// An envelope that claims another sender than the subject it was published
// on is refused (events.ErrForgedSource): resending runs with the operator's
// credential, which may publish as anyone, so it would store the forgery
// under the sender it names.
func ResendDeadLetter(ctx context.Context, js jetstream.JetStream, id uint64, now time.Time) (Resent, error) {
	m, err := GetDeadLetter(ctx, js, id)
	if err != nil {
		return Resent{}, err
	}
	out := Resent{Subject: m.Header.Get(HeaderDLQSubject)}
	env, err := schemas.Unmarshal(m.Data)
	if err == nil {
		if err := events.CheckSource(out.Subject, env); err != nil {
			return Resent{}, fmt.Errorf("dead letter %d not resent: %w", id, err)
		}
	} else {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: out.Subject, Data: m.Data})
		if err != nil {
			return Resent{}, err
		}
		out.Seq = ack.Sequence
		return out, nil
	}
	again := *env
	again.ID, again.ParentID, again.Attempt = schemas.NewID(), env.ID, env.Attempt+1
	again.Timestamp = now.UTC()
	if out.Seq, err = events.New(js).Append(ctx, &again); err != nil {
		return Resent{}, err
	}
	out.ID = again.ID
	return out, nil
}
