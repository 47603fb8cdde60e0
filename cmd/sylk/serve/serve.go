// Package serve is `sylk serve`: the server (broker, projections, agents) in
// the foreground.
package serve

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/server"
)

// ServeOptions are the flags of `sylk serve`.
type ServeOptions struct {
	Listen        string
	Sync          string
	TLSCert       string
	TLSKey        string
	TLSSelfSigned bool
	Insecure      bool
	AckWait       time.Duration
	HTTP          string
}

func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *cmdutil.Factory, *ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Sylk server in the foreground",
		Long: `Run the broker (embedded NATS JetStream on the data directory), the projections
and the agents until interrupted (Ctrl-C or SIGTERM stop it cleanly).

The server writes <data>/server.json with its URL and the path of the admin
credentials, so other sylk commands and any NATS client can find it. Only one
server may own a data directory; a second one fails at once.

Authentication is always on: the first serve on a data directory creates its
NATS operator, accounts and admin credentials in <data>/auth (0600), and
clients connect with a .creds file (` + "`sylk user add`" + ` issues them).
Listening on an address other machines can reach needs TLS: --tls-cert and
--tls-key, or --tls-self-signed (a certificate kept in <data>/tls, its
SHA-256 fingerprint printed and written to server.json); --insecure accepts
clear text instead.

With --nats-url, serve starts no broker: it runs its projections (in its own
--data) and its agents against that NATS server's streams, beside any other
serve on it. Agents of one kind share their durable consumer, so this is how
the work spreads over processes and machines.`,
		Example: `  sylk serve
  sylk serve --listen 127.0.0.1:4333 --sync interval
  sylk serve --listen none          # reachable only from this process
  sylk serve --http 127.0.0.1:9090  # Prometheus scrapes http://127.0.0.1:9090/metrics
  sylk serve --listen 0.0.0.0:4222 --tls-self-signed   # for other machines, over TLS
  sylk serve --listen 0.0.0.0:4222 --tls-cert cert.pem --tls-key key.pem
  sylk --nats-url nats://10.0.0.5:4222 --data /var/lib/sylk-2 serve   # more agents on another machine`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			flags := cmd.Flags()
			if !flags.Changed("listen") && f.Cfg.Listen != "" {
				opts.Listen = f.Cfg.Listen
			}
			if !flags.Changed("http") && f.Cfg.HTTP != "" {
				opts.HTTP = f.Cfg.HTTP
			}
			if !flags.Changed("sync") && f.Cfg.Sync != "" {
				opts.Sync = f.Cfg.Sync
			}
			if flags.Changed("ack-wait") {
				f.Cfg.AckWait = opts.AckWait.String()
			}
			if runF != nil {
				return runF(cmd.Context(), f, opts)
			}
			return serveRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", broker.DefaultListen, `address for NATS clients, HOST:PORT, or "none"`)
	cmd.Flags().StringVar(&opts.Sync, "sync", broker.SyncAlways, `"always": fsync before every ack (durable); "interval": flush every 2s (fast)`)
	cmd.Flags().StringVar(&opts.TLSCert, "tls-cert", "", "TLS certificate file (PEM) for the listener, with --tls-key")
	cmd.Flags().StringVar(&opts.TLSKey, "tls-key", "", "TLS private key file (PEM) for --tls-cert")
	cmd.Flags().BoolVar(&opts.TLSSelfSigned, "tls-self-signed", false, "serve TLS with a self-signed certificate generated once in <data>/tls")
	cmd.Flags().BoolVar(&opts.Insecure, "insecure", false, "allow a listener other machines can reach without TLS (credentials and events in clear text)")
	cmd.Flags().StringVar(&opts.HTTP, "http", "", "serve Prometheus metrics at http://HOST:PORT/metrics (off by default; a non-loopback address needs --insecure)")
	cmd.Flags().DurationVar(&opts.AckWait, "ack-wait", agents.DefaultAckWait, "how soon the work of an agent that died is handed to another (agents working on long tools report in, so this is no time limit)")
	return cmd
}

func serveRun(ctx context.Context, f *cmdutil.Factory, opts *ServeOptions) error {
	bopts := f.BrokerOptions()
	bopts.Listen, bopts.Sync = opts.Listen, opts.Sync
	bopts.TLSCert, bopts.TLSKey, bopts.TLSSelfSigned, bopts.Insecure = opts.TLSCert, opts.TLSKey, opts.TLSSelfSigned, opts.Insecure
	bopts.Name = "sylk-serve"
	srv, err := server.Start(ctx, server.Options{Broker: bopts, Runtime: f.RuntimeConfig(), LLM: f.LLMConfig, HTTP: opts.HTTP, Insecure: opts.Insecure})
	if err != nil {
		return err
	}
	if u := srv.HTTPURL(); u != "" {
		fmt.Fprintf(f.IO.ErrOut, "metrics at %s/metrics\n", u)
	}
	if srv.Broker().Embedded() {
		b := srv.Broker()
		fmt.Fprintf(f.IO.ErrOut, "sylk serving %s on %s (sync %s); Ctrl-C to stop\n", bopts.DataDir, urlOrNone(b.URL()), bopts.Sync)
		if fp := b.TLSFingerprint(); fp != "" {
			fmt.Fprintf(f.IO.ErrOut, "TLS certificate SHA-256 fingerprint %s\n", fp)
		}
		if a := b.Auth(); a != nil {
			fmt.Fprintf(f.IO.ErrOut, "admin credentials: %s\n", a.CredsPath(broker.AdminUser))
		}
	} else {
		fmt.Fprintf(f.IO.ErrOut, "sylk serving projections (%s) and agents against %s; Ctrl-C to stop\n", bopts.DataDir, srv.Broker().URL())
	}
	select {
	case <-ctx.Done():
	case <-srv.Failed():
	}
	// A stop cancels the components too: only a failure without a stop is one.
	if ctx.Err() != nil {
		slog.Info("shutting down")
	} else {
		slog.Error("a server component failed; shutting down")
	}
	return srv.Stop()
}

func urlOrNone(url string) string {
	if url == "" {
		return "no listener"
	}
	return url
}
