package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
)

// authErrorSubject is where the server reports each connection it refused
// (nats-server's client auth error advisory, on the system account).
const authErrorSubject = "$SYS.SERVER.*.CLIENT.AUTH.ERR"

// AuthError is a connection the server refused: no credentials, another
// server's, a revoked user's.
type AuthError struct {
	Host   string // the client's address
	User   string // the credential's public key, when it presented one
	Name   string // the client's connection name, when it gave one
	Reason string // the server's
}

// AuthErrorWatch is a subscription to the connections the embedded server
// refuses. Its Run hands them over; a nil watch has nothing to watch.
type AuthErrorWatch struct {
	nc   *nats.Conn
	sub  *nats.Subscription
	msgs chan *nats.Msg
}

// WatchAuthErrors subscribes to the connections the embedded server refuses.
// The subscription is in place at the server when it returns, so a server
// that says it is up only after this misses no refusal. Without an embedded
// server with authentication there is nothing to watch: it returns nil.
func (b *Broker) WatchAuthErrors() (*AuthErrorWatch, error) {
	if b.auth == nil || b.srv == nil {
		return nil, nil
	}
	nc, err := nats.Connect("", nats.InProcessServer(b.srv), nats.UserCredentials(b.auth.sysCredsPath()), nats.Name("sylk-auth-errors"))
	if err != nil {
		return nil, fmt.Errorf("watch refused connections: %w", err)
	}
	w := &AuthErrorWatch{nc: nc, msgs: make(chan *nats.Msg, 256)}
	if w.sub, err = nc.ChanSubscribe(authErrorSubject, w.msgs); err == nil {
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("watch refused connections: %w", err)
	}
	return w, nil
}

// Run calls fn with each refused connection until ctx ends, then closes the
// watch.
func (w *AuthErrorWatch) Run(ctx context.Context, fn func(AuthError)) error {
	if w == nil {
		return nil
	}
	defer w.nc.Close()
	defer w.sub.Unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
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
			fn(AuthError{Host: adv.Client.Host, User: adv.Client.User, Name: adv.Client.Name, Reason: adv.Reason})
		}
	}
}
