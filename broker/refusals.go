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

// WatchAuthErrors calls fn with each connection the embedded server refuses,
// until ctx ends. Without an embedded server with authentication there is
// nothing to watch: it returns nil at once.
func (b *Broker) WatchAuthErrors(ctx context.Context, fn func(AuthError)) error {
	if b.auth == nil || b.srv == nil {
		return nil
	}
	nc, err := nats.Connect("", nats.InProcessServer(b.srv), nats.UserCredentials(b.auth.sysCredsPath()), nats.Name("sylk-auth-errors"))
	if err != nil {
		return fmt.Errorf("watch refused connections: %w", err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(authErrorSubject, msgs)
	if err != nil {
		return fmt.Errorf("watch refused connections: %w", err)
	}
	defer sub.Unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-msgs:
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
