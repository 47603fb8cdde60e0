package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// authErrorSubject is where the server reports each connection it refused
// (nats-server's client auth error advisory, on the system account).
const authErrorSubject = "$SYS.SERVER.*.CLIENT.AUTH.ERR"

// Refusal actions.
const (
	RefusedConnect   = "connect"
	RefusedPublish   = "publish"
	RefusedSubscribe = "subscribe"
)

// Refusal is something the embedded server refused: a connection (no
// credentials, another server's, a revoked user's), or on an open
// connection a publish or a subscription its permissions forbid.
type Refusal struct {
	Action   string // RefusedConnect, RefusedPublish or RefusedSubscribe
	Host     string // the client's address
	User     string // the credential's public key, when it presented one
	Username string // the credential's Sylk user name, when the server issued it
	Name     string // the client's connection name, when it gave one
	Subject  string // what it published or subscribed to
	Reason   string // the server's
	// Suppressed, when not zero, makes this a summary: that many refusals
	// of the same client were not recorded one by one in the minute before
	// (the rate limit); the other fields are the last of them.
	Suppressed int
}

// Refusals are rate-limited per client: a client in a loop (a publish it
// may not make, a reconnect without credentials) gets RefusalsPerMinute
// refusals recorded a minute, and then one summary of how many more there
// were.
const (
	RefusalsPerMinute = 10
	refusalWindow     = time.Minute
	// refusalBuffer bounds the refusals waiting for the watch: past it
	// they are counted, never waited for (the server's client goroutine
	// logs them).
	refusalBuffer = 1024
)

// RefusalWatch is what the embedded server refuses: connections, from the
// auth error advisories, and publishes and subscriptions, from its log.
// Its Run hands them over; a nil watch has nothing to watch.
type RefusalWatch struct {
	b    *Broker
	nc   *nats.Conn
	sub  *nats.Subscription
	msgs chan *nats.Msg
}

// WatchRefusals subscribes to the refusals of the embedded server. The
// subscription is in place at the server when it returns, so a server that
// says it is up only after this misses no refusal. Without an embedded
// server with authentication there is nothing to watch: it returns nil.
func (b *Broker) WatchRefusals() (*RefusalWatch, error) {
	if b.auth == nil || b.srv == nil {
		return nil, nil
	}
	nc, err := nats.Connect("", nats.InProcessServer(b.srv), nats.UserCredentials(b.auth.sysCredsPath()), nats.Name("sylk-auth-errors"))
	if err != nil {
		return nil, fmt.Errorf("watch refused connections: %w", err)
	}
	w := &RefusalWatch{b: b, nc: nc, msgs: make(chan *nats.Msg, 256)}
	if w.sub, err = nc.ChanSubscribe(authErrorSubject, w.msgs); err == nil {
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("watch refused connections: %w", err)
	}
	return w, nil
}

// Run calls fn with each refusal the rate limit admits, and with the
// summary of those it did not, until ctx ends; then it closes the watch.
func (w *RefusalWatch) Run(ctx context.Context, fn func(Refusal)) error {
	if w == nil {
		return nil
	}
	defer w.nc.Close()
	defer w.sub.Unsubscribe()
	log := w.b.log
	tick := time.NewTicker(refusalWindow / 6)
	defer tick.Stop()
	names := map[string]string{} // public key -> Sylk user name
	emit := func(r Refusal) {
		if r.User != "" {
			r.Username = w.userName(names, r.User)
		}
		fn(r)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			for _, r := range log.limit.expired(time.Now()) {
				emit(r)
			}
			if n := log.dropped.Swap(0); n > 0 {
				slog.Warn("refusals not recorded: the watch fell behind", "count", n)
			}
		case r := <-log.out:
			emit(r)
		case m := <-w.msgs:
			var adv struct {
				Client struct {
					Host string `json:"host"`
					User string `json:"user"`
					Name string `json:"name"`
				} `json:"client"`
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal(m.Data, &adv); err != nil {
				slog.Warn("an auth error advisory that does not decode", "subject", m.Subject, "err", err)
				continue
			}
			r := Refusal{Action: RefusedConnect, Host: adv.Client.Host, User: adv.Client.User, Name: adv.Client.Name, Reason: adv.Reason}
			// A client that reconnects comes from a new port each time: the
			// limit is per address.
			if log.limit.admit("connect "+r.Host, r, time.Now()) {
				emit(r)
			}
		}
	}
}

// userName is the Sylk user name of the credential with public key pub,
// "" when the server did not issue it; looked up once per key.
func (w *RefusalWatch) userName(names map[string]string, pub string) string {
	if n, ok := names[pub]; ok {
		return n
	}
	users, err := w.b.auth.Users()
	if err != nil {
		slog.Warn("look up the user of a refusal", "key", pub, "err", err)
		return ""
	}
	for _, u := range users {
		names[u.PublicKey] = u.Name
	}
	if _, ok := names[pub]; !ok {
		names[pub] = ""
	}
	return names[pub]
}

// refusalLog is the embedded server's logger: it passes every line on to
// nats-server's own logger (when SYLK_NATS_LOG asks for one), and the
// permission violations it is told of to the refusal watch. nats-server
// publishes no event for a publish or subscription it refuses, but logs
// each one.
type refusalLog struct {
	next    server.Logger // nil: the server logs nothing
	limit   *refusalLimiter
	out     chan Refusal
	dropped atomic.Int64
}

func newRefusalLog(next server.Logger) *refusalLog {
	return &refusalLog{next: next, limit: newRefusalLimiter(RefusalsPerMinute, refusalWindow), out: make(chan Refusal, refusalBuffer)}
}

// violations are the lines nats-server logs (client.go's
// pubPermissionViolation and its siblings) for what a client's permissions
// refuse, after the client's label: each goes on with the quoted subject.
var violations = []struct{ marker, action, reason string }{
	{" - Publish Violation - Subject ", RefusedPublish, "Permissions Violation for Publish to %q"},
	{" - Publish Violation - Reply ", RefusedPublish, "Permissions Violation for Publish with Reply of %q"},
	{" - Subscription Violation - Subject ", RefusedSubscribe, "Permissions Violation for Subscription to %q"},
	{" - Subscription Violation Too Many Tokens - Subject ", RefusedSubscribe, "Permissions Violation for Subscription to %q, too many tokens"},
}

func (l *refusalLog) Errorf(format string, v ...any) {
	if strings.Contains(format, " Violation") {
		l.violation(fmt.Sprintf(format, v...))
	}
	if l.next != nil {
		l.next.Errorf(format, v...)
	}
}

// violation hands the permission violation a log line tells of, if the
// limit admits it, to the watch.
func (l *refusalLog) violation(line string) {
	for _, vi := range violations {
		label, rest, ok := strings.Cut(line, vi.marker)
		if !ok {
			continue
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return
		}
		subject, _ := strconv.Unquote(q)
		r, conn := parseClientLabel(label)
		r.Action, r.Subject, r.Reason = vi.action, subject, fmt.Sprintf(vi.reason, subject)
		if !l.limit.admit(vi.action+" "+conn, r, time.Now()) {
			return
		}
		select {
		case l.out <- r:
		default:
			l.dropped.Add(1)
		}
		return
	}
}

func (l *refusalLog) Noticef(format string, v ...any) {
	if l.next != nil {
		l.next.Noticef(format, v...)
	}
}

func (l *refusalLog) Warnf(format string, v ...any) {
	if l.next != nil {
		l.next.Warnf(format, v...)
	}
}

func (l *refusalLog) Fatalf(format string, v ...any) {
	if l.next != nil {
		l.next.Fatalf(format, v...)
	}
}

func (l *refusalLog) Debugf(format string, v ...any) {
	if l.next != nil {
		l.next.Debugf(format, v...)
	}
}

func (l *refusalLog) Tracef(format string, v ...any) {
	if l.next != nil {
		l.next.Tracef(format, v...)
	}
}

// parseClientLabel reads the label nats-server puts before what it logs of
// a client: `<address> - cid:<id>[ - "<version>:<lang>:<name>"][ -
// "<account key>/<account name>/jwt:<user key>"]`. It returns what it says and the
// connection's identity (address and id).
func parseClientLabel(label string) (Refusal, string) {
	var r Refusal
	addr, rest, _ := strings.Cut(label, " - ")
	cid, rest, _ := strings.Cut(rest, " - ")
	r.Host = addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		r.Host = h
	}
	var quoted []string
	for rest != "" {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			break
		}
		s, _ := strconv.Unquote(q)
		quoted = append(quoted, s)
		rest = strings.TrimPrefix(rest[len(q):], " - ")
	}
	for _, s := range quoted {
		if key, ok := credentialKey(s); ok {
			r.User = key
		} else if parts := strings.SplitN(s, ":", 3); len(parts) == 3 {
			r.Name = parts[2] // after the client's version and language
		}
	}
	return r, addr + " " + cid
}

// credentialKey reads a label's `<account>/<kind>:<key>` part, the
// credential the client authenticated with (the account may hold a slash).
func credentialKey(s string) (string, bool) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "", false
	}
	cred := s[i+1:]
	kind, key, ok := strings.Cut(cred, ":")
	return key, ok && (kind == "jwt" || kind == "nkey" || kind == "user")
}

// refusalLimiter admits RefusalsPerMinute refusals per client in each
// window, and counts the others for a summary when the window ends.
type refusalLimiter struct {
	mu      sync.Mutex
	per     int
	window  time.Duration
	clients map[string]*refusalCount
}

type refusalCount struct {
	start      time.Time
	recorded   int
	suppressed int
	last       Refusal // the last suppressed
}

func newRefusalLimiter(per int, window time.Duration) *refusalLimiter {
	return &refusalLimiter{per: per, window: window, clients: map[string]*refusalCount{}}
}

// admit reports whether client's refusal r, at now, is to be recorded.
func (l *refusalLimiter) admit(client string, r Refusal, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[client]
	if c == nil || now.Sub(c.start) >= l.window && c.suppressed == 0 {
		c = &refusalCount{start: now}
		l.clients[client] = c
	}
	if c.recorded < l.per && now.Sub(c.start) < l.window {
		c.recorded++
		return true
	}
	c.suppressed++
	c.last = r
	return false
}

// expired returns a summary of each client whose window ended with
// refusals suppressed, and forgets the clients whose window ended.
func (l *refusalLimiter) expired(now time.Time) []Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Refusal
	for client, c := range l.clients {
		if now.Sub(c.start) < l.window {
			continue
		}
		if c.suppressed > 0 {
			r := c.last
			r.Suppressed = c.suppressed
			out = append(out, r)
		}
		delete(l.clients, client)
	}
	return out
}
