package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/web"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/tools"
)

// listenHTTP binds the HTTP listener before anything starts, so a taken or
// refused address fails the server at once. "" is no listener.
func listenHTTP(addr string, insecure bool) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: want HOST:PORT, e.g. 127.0.0.1:9090 (port 0 picks a free one): %w", addr, err)
	}
	if !insecure && !broker.Loopback(host) {
		return nil, fmt.Errorf("--http %q is reachable from other machines over plain HTTP: listen on 127.0.0.1 (and scrape through a proxy or tunnel), or give --insecure", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	return ln, nil
}

func closeListener(ln net.Listener) error {
	if ln == nil {
		return nil
	}
	return ln.Close()
}

// httpComponent serves /metrics and the web view on ln until ctx ends.
func httpComponent(ln net.Listener) serverComponent {
	return serverComponent{"http", func(ctx context.Context, s *Server) error {
		m := s.metrics
		stop, err := m.Follow(ctx, s.store)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		s.web.Register(mux)
		// Requests run under ctx: when the server stops, an open page's
		// live stream ends with it, rather than holding the shutdown until
		// its deadline (which made serve exit 1 with a page open).
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case err := <-done:
			return fmt.Errorf("http: %w", err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}}
}

// startWeb starts the web view, fed by the projector of store. Its token
// derives from the credential this process reaches NATS with, the one `sylk`
// commands use (server.json names it); a server without authentication makes
// one up.
func startWeb(ctx context.Context, b *broker.Broker, store *projections.Store, secrets tools.SecretOptions) (*web.Web, error) {
	o := b.Options()
	secret, err := web.Credential{CredsFile: o.CredsFile, Token: o.Token, User: o.User, Password: o.Password}.Secret()
	if errors.Is(err, web.ErrNoCredential) {
		secret, err = web.RandomSecret(), nil
	}
	if err != nil {
		return nil, err
	}
	return web.Start(ctx, web.Options{Conn: b.Conn(), Log: events.New(b.JetStream()), Store: store, JS: b.JetStream(), Secrets: secrets, Secret: secret, Now: time.Now})
}
