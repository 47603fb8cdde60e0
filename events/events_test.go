package events_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLog(t *testing.T) (*events.Log, *broker.Broker) {
	b := brokertest.Start(t, brokertest.Options(t))
	return events.New(b.JetStream()), b
}

func userInput(t testing.TB, session, text string) *schemas.Envelope {
	env, err := schemas.New(schemas.TypeUserInput, session, "user", "", time.Now(), schemas.UserInput{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestAppendSetsSubjectAndHeaders(t *testing.T) {
	log, _ := newLog(t)
	ctx := brokertest.Context(t)
	env, _ := schemas.New(schemas.TypeTaskDispatch, "S1", "orchestrator", "engineer", time.Now(), schemas.TaskDispatch{DAGID: "d", NodeID: "n", Agent: "engineer", Tool: "exec"})
	seq, err := log.Append(ctx, env)
	if err != nil || seq != 1 {
		t.Fatalf("Append = %d, %v", seq, err)
	}
	evs, err := log.Read(ctx, events.Filter{}.Subject(), events.Cursor{}, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Read = %d events, %v", len(evs), err)
	}
	ev := evs[0]
	if ev.Subject != "sylk.v1.S1.orchestrator.engineer.task_dispatch" {
		t.Fatalf("subject = %s", ev.Subject)
	}
	want := map[string]string{
		"Nats-Msg-Id": env.ID, "Sylk-Schema": "1", "Sylk-Session": "S1", "Sylk-Type": "task_dispatch",
		"Sylk-Source": "orchestrator", "Sylk-Target": "engineer", "Sylk-Correlation": env.CorrelationID,
		"Content-Type": "application/msgpack",
	}
	for k, v := range want {
		if got := nats.Header(ev.Header).Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if ev.Err != nil || ev.Env.ID != env.ID {
		t.Fatalf("decoded %+v, err %v", ev.Env, ev.Err)
	}
}

func TestUnaddressedGoesToGuide(t *testing.T) {
	if s := events.Subject(userInput(t, "S1", "hi")); s != "sylk.v1.S1.user.guide.user_input" {
		t.Fatalf("subject = %s", s)
	}
}

func TestEveryTypeRoundTripsThroughTheStream(t *testing.T) {
	log, _ := newLog(t)
	ctx := brokertest.Context(t)
	sent := map[string]*schemas.Envelope{}
	for _, typ := range schemas.Types() {
		p, _ := schemas.NewPayload(typ)
		env, err := schemas.New(typ, "S1", "user", "", time.Now(), p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.Append(ctx, env); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		sent[env.ID] = env
	}
	evs, err := log.Read(ctx, events.Filter{Session: "S1"}.Subject(), events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(sent) {
		t.Fatalf("read %d events, sent %d", len(evs), len(sent))
	}
	for _, ev := range evs {
		want := sent[ev.Env.ID]
		if want == nil || ev.Env.Type != want.Type || string(ev.Env.Payload) != string(want.Payload) {
			t.Fatalf("event %d: %+v does not match what was sent", ev.Seq, ev.Env)
		}
	}
}

func TestAppendRefusesInvalidEnvelope(t *testing.T) {
	log, _ := newLog(t)
	env := userInput(t, "bad session!", "x")
	_, err := log.Append(brokertest.Context(t), env)
	var fe *schemas.FieldError
	if !errors.As(err, &fe) || fe.Field != "session_id" || fe.Value != "bad session!" {
		t.Fatalf("err = %v, want a field error naming session_id and its value", err)
	}
}

func TestAppendDeduplicatesByID(t *testing.T) {
	log, b := newLog(t)
	ctx := brokertest.Context(t)
	env := userInput(t, "S1", "once")
	s1, err := log.Append(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := log.Append(ctx, env)
	if err != nil || s2 != s1 {
		t.Fatalf("second append = %d, %v; want %d, nil", s2, err, s1)
	}
	if n := streamMsgs(t, b); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

func streamMsgs(t *testing.T, b *broker.Broker) uint64 {
	s, err := b.JetStream().Stream(brokertest.Context(t), broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(brokertest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestAppendBatchIsAtomic(t *testing.T) {
	log, b := newLog(t)
	ctx := brokertest.Context(t)
	var batch []*schemas.Envelope
	for i := range 10 {
		batch = append(batch, userInput(t, "S1", fmt.Sprint(i)))
	}
	seqs, err := log.AppendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("seqs = %v, want 1..10", seqs)
		}
	}
	// A batch with one event already stored is refused whole.
	again := []*schemas.Envelope{userInput(t, "S1", "new"), batch[3], userInput(t, "S1", "new2")}
	if _, err := log.AppendBatch(ctx, again); !errors.Is(err, events.ErrDuplicate) {
		t.Fatalf("err = %v, want ErrDuplicate", err)
	}
	if n := streamMsgs(t, b); n != 10 {
		t.Fatalf("stream holds %d messages after a refused batch, want 10", n)
	}
	// An invalid event fails the batch before anything is sent.
	bad := []*schemas.Envelope{userInput(t, "S1", "ok"), userInput(t, "", "no session")}
	if _, err := log.AppendBatch(ctx, bad); !errors.Is(err, schemas.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	big := make([]*schemas.Envelope, events.MaxBatch+1)
	if _, err := log.AppendBatch(ctx, big); !errors.Is(err, events.ErrBatchTooLarge) {
		t.Fatalf("err = %v, want ErrBatchTooLarge", err)
	}
	if n := streamMsgs(t, b); n != 10 {
		t.Fatalf("stream holds %d messages, want 10", n)
	}
}

func TestTailShowsGarbageAsInvalid(t *testing.T) {
	log, b := newLog(t)
	ctx := brokertest.Context(t)
	// An outside client publishes bytes that are not an envelope.
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S1.outsider.guide.user_input", []byte("not msgpack")); err != nil {
		t.Fatal(err)
	}
	log.Append(ctx, userInput(t, "S1", "after"))
	tail, err := log.Tail(ctx, events.Filter{Session: "S1"}.Subject(), events.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	first, err := tail.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Env != nil || !errors.Is(first.Err, schemas.ErrDecode) {
		t.Fatalf("garbage event: env %v err %v, want ErrDecode", first.Env, first.Err)
	}
	second, err := tail.Next(ctx)
	if err != nil || second.Env == nil {
		t.Fatalf("tail stalled after garbage: %v", err)
	}
}

// A Raw read hands over the bytes as stored, garbage included, decoding
// nothing; Scan, Read and Tail take it alike, and the default still decodes.
func TestRawReadsDoNotDecode(t *testing.T) {
	log, b := newLog(t)
	ctx := brokertest.Context(t)
	env := userInput(t, "S1", "hello")
	if _, err := log.Append(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S1.outsider.guide.user_input", []byte("not msgpack")); err != nil {
		t.Fatal(err)
	}
	want, _ := schemas.Marshal(env)
	check := func(how string, evs []*events.Event) {
		t.Helper()
		if len(evs) != 2 {
			t.Fatalf("%s: %d events, want 2", how, len(evs))
		}
		for i, ev := range evs {
			if ev.Env != nil || ev.Err != nil || ev.Seq != uint64(i+1) || ev.Pending != uint64(1-i) || ev.Time.IsZero() {
				t.Fatalf("%s: event %d = seq %d pending %d env %v err %v, want raw", how, i, ev.Seq, ev.Pending, ev.Env, ev.Err)
			}
		}
		if string(evs[0].Data) != string(want) || nats.Header(evs[0].Header).Get(events.HeaderMsgID) != env.ID {
			t.Fatalf("%s: first event's bytes or headers differ from what was appended", how)
		}
		if string(evs[1].Data) != "not msgpack" || evs[1].Subject != "sylk.v1.S1.outsider.guide.user_input" {
			t.Fatalf("%s: second event %q on %s", how, evs[1].Data, evs[1].Subject)
		}
		var got schemas.Envelope
		p, err := schemas.UnmarshalPayloadInto(evs[0].Data, &got)
		if err != nil || got.ID != env.ID || p.(*schemas.UserInput).Text != "hello" {
			t.Fatalf("%s: the raw bytes decode to %v, %v, %v", how, got, p, err)
		}
	}
	evs, err := log.Read(ctx, events.Filter{}.Subject(), events.Cursor{}, 0, events.Raw())
	if err != nil {
		t.Fatal(err)
	}
	check("Read", evs)
	tail, err := log.Tail(ctx, events.Filter{}.Subject(), events.Cursor{}, events.Raw())
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	evs = nil
	for range 2 {
		ev, err := tail.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	check("Tail", evs)
	evs, err = log.Read(ctx, events.Filter{}.Subject(), events.Cursor{}, 0)
	if err != nil || len(evs) != 2 || evs[0].Env == nil || evs[0].Env.ID != env.ID || !errors.Is(evs[1].Err, schemas.ErrDecode) {
		t.Fatalf("default Read decodes: %v, %v", evs, err)
	}
}

func TestTailFromCursors(t *testing.T) {
	log, _ := newLog(t)
	ctx := brokertest.Context(t)
	for i := range 5 {
		log.Append(ctx, userInput(t, "S1", fmt.Sprint(i)))
	}
	for _, c := range []struct {
		cursor events.Cursor
		first  uint64
	}{{events.Cursor{}, 1}, {events.Cursor{Seq: 4}, 4}, {events.Cursor{Time: time.Now().Add(-time.Hour)}, 1}} {
		tail, err := log.Tail(ctx, events.Filter{}.Subject(), c.cursor)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := tail.Next(ctx)
		tail.Stop()
		if err != nil || ev.Seq != c.first {
			t.Fatalf("cursor %+v: first = %v, %v; want seq %d", c.cursor, ev, err, c.first)
		}
	}
	// "new" sees only what comes after.
	tail, _ := log.Tail(ctx, events.Filter{}.Subject(), events.Cursor{New: true})
	defer tail.Stop()
	log.Append(ctx, userInput(t, "S1", "later"))
	ev, err := tail.Next(ctx)
	if err != nil || ev.Seq != 6 {
		t.Fatalf("new: first = %v, %v; want seq 6", ev, err)
	}
}

func TestParseCursor(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]events.Cursor{
		"all": {}, "new": {New: true}, "42": {Seq: 42},
		"2026-11-21T09:00:00Z": {Time: now.Add(-time.Hour)}, "10m": {Time: now.Add(-10 * time.Minute)},
	} {
		got, err := events.ParseCursor(in, now)
		if err != nil || got.Seq != want.Seq || got.New != want.New || !got.Time.Equal(want.Time) {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if _, err := events.ParseCursor("yesterday", now); err == nil {
		t.Error("ParseCursor accepted 'yesterday'")
	}
}

func TestParseSubject(t *testing.T) {
	for in, want := range map[string]string{
		"": "sylk.v1.>", "S1.>": "sylk.v1.S1.>", "sylk.v1.*.*.engineer.*": "sylk.v1.*.*.engineer.*",
		"*.*.*.task_dispatch": "sylk.v1.*.*.*.task_dispatch",
	} {
		if got, err := events.ParseSubject(in); err != nil || got != want {
			t.Errorf("ParseSubject(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"S1", "a.>.b", "a.b c", "a.b.c.d.e.f"} {
		if _, err := events.ParseSubject(bad); err == nil {
			t.Errorf("ParseSubject(%q) accepted", bad)
		}
	}
}

// A tail over TCP survives a server restart: it resumes after the last event it
// returned, with no gap and no duplicate.
func TestTailResumesAcrossServerRestart(t *testing.T) {
	ctx := brokertest.Context(t)
	opts := brokertest.Options(t)
	opts.Listen = freeAddr(t)
	b, err := broker.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	appender := events.New(b.JetStream())
	for i := range 5 {
		if _, err := appender.Append(ctx, userInput(t, "S1", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(b.URL(), nats.UserCredentials(b.Options().CredsFile), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	tail, err := events.New(js).Tail(ctx, events.Filter{}.Subject(), events.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	var seen []uint64
	next := func() {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		ev, err := tail.Next(nctx)
		if err != nil {
			t.Fatalf("tail after %v: %v", seen, err)
		}
		seen = append(seen, ev.Seq)
	}
	for range 3 {
		next()
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = broker.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	appender = events.New(b.JetStream())
	for i := 5; i < 8; i++ {
		if _, err := appender.Append(ctx, userInput(t, "S1", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		next()
	}
	for i, s := range seen {
		if s != uint64(i+1) {
			t.Fatalf("sequences seen across the restart = %v, want 1..8 once each", seen)
		}
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestGetAndLastSeq(t *testing.T) {
	log, _ := newLog(t)
	ctx := brokertest.Context(t)
	if last, err := log.LastSeq(ctx); err != nil || last != 0 {
		t.Fatalf("LastSeq of an empty stream = %d, %v", last, err)
	}
	env := userInput(t, "S1", "x")
	log.Append(ctx, env)
	log.Append(ctx, userInput(t, "S1", "y"))
	ev, err := log.Get(ctx, 1)
	if err != nil || ev.Env.ID != env.ID || ev.Seq != 1 {
		t.Fatalf("Get(1) = %+v, %v", ev, err)
	}
	if last, _ := log.LastSeq(ctx); last != 2 {
		t.Fatalf("LastSeq = %d, want 2", last)
	}
	if _, err := log.Get(ctx, 99); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("Get(99): err = %v, want ErrNotFound", err)
	}
}

// AppendPipelined stores the envelopes in the order given and returns the
// last one's sequence (0 for none).
func TestAppendPipelinedKeepsTheOrder(t *testing.T) {
	log, _ := newLog(t)
	ctx := brokertest.Context(t)
	envs := []*schemas.Envelope{userInput(t, "S1", "a"), userInput(t, "S1", "b"), userInput(t, "S2", "c")}
	last, err := log.AppendPipelined(ctx, envs)
	if err != nil {
		t.Fatal(err)
	}
	if last != 3 {
		t.Fatalf("last sequence %d, want 3", last)
	}
	got, err := log.Read(ctx, "sylk.v1.>", events.Cursor{Seq: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range got {
		if ev.Env == nil || ev.Env.ID != envs[i].ID || ev.Seq != uint64(i+1) {
			t.Fatalf("event %d: %+v, want %s at seq %d", i, ev, envs[i].ID, i+1)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d events stored, want 3", len(got))
	}
	if seq, err := log.AppendPipelined(ctx, nil); err != nil || seq != 0 {
		t.Fatalf("nothing to append: seq %d, err %v", seq, err)
	}
}
