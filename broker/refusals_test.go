package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sylk/sylk/broker/internal/poll"
)

// watchRefusals runs b's refusal watch and hands over what it reports.
func watchRefusals(t *testing.T, b *Broker) <-chan Refusal {
	t.Helper()
	w, err := b.WatchRefusals()
	if err != nil || w == nil {
		t.Fatalf("WatchRefusals = %v, %v", w, err)
	}
	out := make(chan Refusal, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(r Refusal) { out <- r })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// A real client holding an observer's credentials publishes into sylk.v1.>
// and subscribes where it may not: each refusal is reported with the user,
// the connection's name and the subject. A publish loop is reported
// RefusalsPerMinute times, and the rest as a count.
func TestPermissionRefusalsAreReportedAndRateLimited(t *testing.T) {
	b, err := Start(testContext(t), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	refusals := watchRefusals(t, b)
	u, err := b.Auth().AddUser("dash", Role{Kind: RoleObserver})
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	nc, err := nats.Connect(b.URL(), nats.Name("dashboard"), nats.UserCredentials(u.Creds),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				refused.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	next := func() Refusal {
		t.Helper()
		select {
		case r := <-refusals:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no refusal reported in 10 s")
			return Refusal{}
		}
	}
	if err := nc.Publish("sylk.v1.S1.user.guide.user_input", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	r := next()
	want := Refusal{Action: RefusedPublish, Host: "127.0.0.1", User: u.PublicKey, Username: "dash", Name: "dashboard",
		Subject: "sylk.v1.S1.user.guide.user_input", Reason: `Permissions Violation for Publish to "sylk.v1.S1.user.guide.user_input"`}
	if r != want {
		t.Errorf("publish refusal:\n got %+v\nwant %+v", r, want)
	}
	if _, err := nc.SubscribeSync("$SYS.>"); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.Action != RefusedSubscribe || r.Subject != "$SYS.>" || r.Username != "dash" {
		t.Errorf("subscribe refusal: %+v", r)
	}

	// A flood from the same connection: 8 more are reported (10 a minute
	// in all on this connection's publishes), the rest counted.
	const flood = 500
	for i := range flood {
		if err := nc.Publish(fmt.Sprintf("sylk.v1.S1.user.guide.n%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	waitSuppressed(t, b, flood-(RefusalsPerMinute-1))
	if !poll.Until(20*time.Second, func() bool { return refused.Load() >= flood+2 }) {
		t.Fatalf("the client was told of %d refusals, want %d", refused.Load(), flood+2)
	}
	for range RefusalsPerMinute - 1 {
		if r := next(); r.Action != RefusedPublish || r.Username != "dash" {
			t.Errorf("flood refusal: %+v", r)
		}
	}
	select {
	case r := <-refusals:
		t.Fatalf("a refusal past the rate limit was reported: %+v", r)
	default:
	}
	summary := b.log.limit.expired(time.Now().Add(refusalWindow))
	if len(summary) != 1 || summary[0].Suppressed != flood-(RefusalsPerMinute-1) || summary[0].Subject != fmt.Sprintf("sylk.v1.S1.user.guide.n%d", flood-1) {
		t.Errorf("summary at the window's end: %+v, want one of %d suppressed, the last n%d", summary, flood-(RefusalsPerMinute-1), flood-1)
	}
}

// Refused connections are limited per address: a client reconnecting in a
// loop without credentials gets RefusalsPerMinute records.
func TestRefusedConnectionsAreRateLimited(t *testing.T) {
	b, err := Start(testContext(t), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	refusals := watchRefusals(t, b)
	const tries = RefusalsPerMinute + 15
	for range tries {
		if nc, err := nats.Connect(b.URL(), nats.NoReconnect()); err == nil {
			nc.Close()
			t.Fatal("an anonymous client connected")
		}
	}
	for i := range RefusalsPerMinute {
		select {
		case r := <-refusals:
			if r.Action != RefusedConnect || r.Host != "127.0.0.1" {
				t.Errorf("refusal %d: %+v", i, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d refusals reported, want %d", i, RefusalsPerMinute)
		}
	}
	waitSuppressed(t, b, tries-RefusalsPerMinute)
	select {
	case r := <-refusals:
		t.Fatalf("a refusal past the rate limit was reported: %+v", r)
	default:
	}
}

// waitSuppressed waits until the rate limit has counted n refusals it left
// out.
func waitSuppressed(t *testing.T, b *Broker, n int) {
	t.Helper()
	l := b.log.limit
	got := 0
	if !poll.Until(20*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		got = 0
		for _, c := range l.clients {
			got += c.suppressed
		}
		return got == n
	}) {
		t.Fatalf("%d refusals suppressed, want %d", got, n)
	}
}

// The limiter: per client, RefusalsPerMinute a window, then a summary of
// the rest when the window ends; a new window admits again.
func TestRefusalLimiter(t *testing.T) {
	l := newRefusalLimiter(2, time.Minute)
	t0 := time.Unix(1000, 0)
	for i, want := range []bool{true, true, false, false} {
		if got := l.admit("a", Refusal{Subject: fmt.Sprint(i)}, t0.Add(time.Duration(i)*time.Second)); got != want {
			t.Errorf("a, refusal %d: admitted %v, want %v", i, got, want)
		}
	}
	if !l.admit("b", Refusal{}, t0) {
		t.Error("another client is limited by a's refusals")
	}
	if s := l.expired(t0.Add(59 * time.Second)); len(s) != 0 {
		t.Errorf("summary before the window ended: %+v", s)
	}
	s := l.expired(t0.Add(time.Minute))
	if len(s) != 1 || s[0].Suppressed != 2 || s[0].Subject != "3" {
		t.Errorf("summary: %+v, want a's 2 suppressed, the last 3", s)
	}
	if !l.admit("a", Refusal{}, t0.Add(61*time.Second)) {
		t.Error("a new window does not admit")
	}
}

// The label nats-server logs before a client's line.
func TestParseClientLabel(t *testing.T) {
	r, conn := parseClientLabel(`127.0.0.1:5123 - cid:7 - "v1.55.0:go:my:app" - "ABC/SYLK/jwt:UKEY"`)
	if r.Host != "127.0.0.1" || r.Name != "my:app" || r.User != "UKEY" || conn != "127.0.0.1:5123 cid:7" {
		t.Errorf("parsed %+v, %q", r, conn)
	}
	r, _ = parseClientLabel(`pipe - cid:9`)
	if r.Host != "pipe" || r.Name != "" || r.User != "" {
		t.Errorf("parsed %+v", r)
	}
}
