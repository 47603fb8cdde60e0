// Package serve is `sylk serve`: the server (broker, projections, agents) in
// the foreground.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/runtime"
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
	// AckWait is the --ack-wait flag's value, 0 when not given.
	AckWait  time.Duration
	HTTP     string
	Cluster  broker.Cluster
	Replicas int
	Roles    []string
	Agents   []string
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

--http HOST:PORT (off by default) serves the web view at / and Prometheus
metrics at /metrics. The web view shows the sessions with their DAGs drawn
live, the event log with the filters of 'sylk tail', what waits on you
(approve or reject a plan), all kept current by the stream. It takes the
CLI's credentials: its address carries a token derived from the credential in
server.json, printed at start and by 'sylk web url'; a request without it is
refused. /metrics needs no token (Prometheus scrapes it; loopback only).

With --nats-url, serve starts no broker: it runs its projections (in its own
--data) and its agents against that NATS server's streams, beside any other
serve on it. Agents of one kind share their durable consumer, so this is how
the work spreads over processes and machines. --nats-url takes several URLs,
comma-separated (the members of a cluster): the process fails over between
them, and an append retried after a failover is stored once.

--roles chooses what the process runs: broker (the embedded NATS server),
projections (its own store, folded from the stream, and the query API the
CLI uses), agents (--agents chooses which; they need the projections). All
three by default; projections,agents with --nats-url.

A cluster: each member is a serve with --cluster-listen (where the other
members connect), --routes (their --cluster-listen addresses) and the same
--cluster-name. A member the others reach at another address than its
--cluster-listen (behind a NAT or a proxy) gives it as --cluster-advertise,
and the others route to that. Before the other members first start, copy the first one's
<data>/auth and <data>/audit into their data directories: the members share
the credentials (only members holding them may route) and the audit key.
--replicas N keeps N copies of the streams over the members (at most the
cluster's size); 'sylk stream replicas N' changes it later. A member started
before its peers waits for a majority, saying which peers it sees; once up
it prints them.`,
		Example: `  sylk serve
  sylk serve --listen 127.0.0.1:4333 --sync interval
  sylk serve --listen none          # reachable only from this process
  sylk serve --http 127.0.0.1:9090  # the web view (sylk web url), and /metrics for Prometheus
  sylk serve --listen 0.0.0.0:4222 --tls-self-signed   # for other machines, over TLS
  sylk serve --listen 0.0.0.0:4222 --tls-cert cert.pem --tls-key key.pem
  sylk --nats-url nats://10.0.0.5:4222 --data /var/lib/sylk-2 serve   # more agents on another machine

  # a three-member cluster on one machine, streams with three copies
  sylk --data d1 serve --listen 127.0.0.1:4221 --cluster-listen 127.0.0.1:6221 --routes 127.0.0.1:6222,127.0.0.1:6223 --replicas 3
  cp -r d1/auth d1/audit d2/ && cp -r d1/auth d1/audit d3/   # once, before d2 and d3 first start
  sylk --data d2 serve --listen 127.0.0.1:4222 --cluster-listen 127.0.0.1:6222 --routes 127.0.0.1:6221,127.0.0.1:6223 --replicas 3 --roles broker
  sylk --data d3 serve --listen 127.0.0.1:4223 --cluster-listen 127.0.0.1:6223 --routes 127.0.0.1:6221,127.0.0.1:6222 --replicas 3 --agents engineer,tester

  # engineers only, on another machine, against the cluster
  sylk --nats-url nats://10.0.0.5:4221,nats://10.0.0.6:4222 --creds admin.creds serve --agents engineer`,
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
			if !flags.Changed("ack-wait") {
				// The configuration's, if any, decides; the flag's value is
				// kept out of f.Cfg, which a reload compares with the files.
				opts.AckWait = 0
			}
			if err := opts.fromConfig(flags, f.Cfg); err != nil {
				return err
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
	cmd.Flags().StringVar(&opts.HTTP, "http", "", "serve the web view at http://HOST:PORT/ and Prometheus metrics at /metrics (off by default; a non-loopback address needs --insecure)")
	cmd.Flags().StringVar(&opts.Cluster.Name, "cluster-name", "", "the cluster's name, the same on every member (default "+broker.DefaultClusterName+")")
	cmd.Flags().StringVar(&opts.Cluster.Listen, "cluster-listen", "", "HOST:PORT where the other cluster members connect (routes)")
	cmd.Flags().StringSliceVar(&opts.Cluster.Routes, "routes", nil, "the other members' addresses (their --cluster-advertise or --cluster-listen), HOST:PORT,...")
	cmd.Flags().StringVar(&opts.Cluster.Advertise, "cluster-advertise", "", "HOST:PORT where the other members reach this one, when not --cluster-listen (a NAT or a proxy in between)")
	cmd.Flags().IntVar(&opts.Replicas, "replicas", 0, "copies of the streams the cluster keeps (default: 1 for new streams, unchanged for existing ones)")
	cmd.Flags().StringSliceVar(&opts.Roles, "roles", nil, "what this process runs: broker,projections,agents (default all; projections,agents with --nats-url)")
	cmd.Flags().StringSliceVar(&opts.Agents, "agents", nil, "the agents this process runs, e.g. engineer,tester (default all)")
	cmd.Flags().DurationVar(&opts.AckWait, "ack-wait", agents.DefaultAckWait, "how soon the work of an agent that died is handed to another (agents working on long tools report in, so this is no time limit)")
	return cmd
}

// fromConfig takes the settings of the configuration that no flag gave, and
// checks the roles and agents.
func (opts *ServeOptions) fromConfig(flags *pflag.FlagSet, cfg cmdutil.Config) error {
	if !flags.Changed("cluster-name") && cfg.Cluster.Name != "" {
		opts.Cluster.Name = cfg.Cluster.Name
	}
	if !flags.Changed("cluster-listen") && cfg.Cluster.Listen != "" {
		opts.Cluster.Listen = cfg.Cluster.Listen
	}
	if !flags.Changed("cluster-advertise") && cfg.Cluster.Advertise != "" {
		opts.Cluster.Advertise = cfg.Cluster.Advertise
	}
	if !flags.Changed("routes") && len(cfg.Cluster.Routes) > 0 {
		opts.Cluster.Routes = cfg.Cluster.Routes
	}
	if !flags.Changed("replicas") && cfg.Replicas != 0 {
		opts.Replicas = cfg.Replicas
	}
	if !flags.Changed("roles") {
		opts.Roles = cfg.Roles
	}
	if !flags.Changed("agents") && len(cfg.Agents) > 0 {
		opts.Agents = cfg.Agents
	}
	if opts.Roles == nil {
		opts.Roles = server.Roles
		if cfg.NATSURL != "" {
			opts.Roles = []string{server.RoleProjections, server.RoleAgents}
		}
	}
	if err := server.CheckRoles(opts.Roles, cfg.NATSURL); err != nil {
		return cmdutil.UsageError{Err: err}
	}
	if opts.Agents != nil {
		known := runtime.AgentNames()
		for _, a := range opts.Agents {
			if !slices.Contains(known, a) {
				return cmdutil.Usagef("--agents %q: the agents are %s", a, strings.Join(known, ", "))
			}
		}
		if !slices.Contains(opts.Roles, server.RoleAgents) {
			return cmdutil.Usagef("--agents %s but --roles %s runs no agents: add agents to --roles", strings.Join(opts.Agents, ","), strings.Join(opts.Roles, ","))
		}
	}
	return nil
}

func serveRun(ctx context.Context, f *cmdutil.Factory, opts *ServeOptions) error {
	bopts := f.BrokerOptions()
	bopts.Listen, bopts.Sync = opts.Listen, opts.Sync
	bopts.TLSCert, bopts.TLSKey, bopts.TLSSelfSigned, bopts.Insecure = opts.TLSCert, opts.TLSKey, opts.TLSSelfSigned, opts.Insecure
	bopts.Cluster, bopts.Replicas = opts.Cluster, opts.Replicas
	bopts.Name = "sylk-serve"
	rt := f.RuntimeConfig()
	rt.Agents = opts.Agents
	// An agents-only process takes --sync (or the config's sync) as the
	// mode of the server it attaches to.
	rt.GroupCommit = opts.Sync == broker.SyncAlways
	if opts.AckWait > 0 {
		rt.AckWait = opts.AckWait
	}
	srv, err := server.Start(ctx, server.Options{Broker: bopts, Runtime: rt, LLM: f.LLMConfig, HTTP: opts.HTTP, Insecure: opts.Insecure, Roles: opts.Roles, Scheduler: true,
		Reload: f.Reload, Watch: cmdutil.ConfigDirs()})
	if errors.Is(err, broker.ErrInvalidOptions) {
		return cmdutil.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	if u := srv.HTTPURL(); u != "" {
		fmt.Fprintf(f.IO.ErrOut, "metrics at %s/metrics\nweb view at %s\n", u, srv.WebURL())
	}
	what := strings.Join(opts.Roles, ", ")
	if opts.Agents != nil {
		what += " (" + strings.Join(opts.Agents, ", ") + ")"
	}
	if srv.Broker().Embedded() {
		b := srv.Broker()
		fmt.Fprintf(f.IO.ErrOut, "sylk serving %s on %s (sync %s; %s); Ctrl-C to stop\n", bopts.DataDir, urlOrNone(b.URL()), bopts.Sync, what)
		if bopts.Cluster.Enabled() {
			fmt.Fprintf(f.IO.ErrOut, "cluster member %s, routes on %s; peers seen: %s\n", b.ServerName(), bopts.Cluster.Listen, strings.Join(b.Peers(), ", "))
		}
		if fp := b.TLSFingerprint(); fp != "" {
			fmt.Fprintf(f.IO.ErrOut, "TLS certificate SHA-256 fingerprint %s\n", fp)
		}
		if a := b.Auth(); a != nil {
			fmt.Fprintf(f.IO.ErrOut, "admin credentials: %s\n", a.CredsPath(broker.AdminUser))
		}
	} else {
		fmt.Fprintf(f.IO.ErrOut, "sylk serving %s (%s) against %s; Ctrl-C to stop\n", what, bopts.DataDir, srv.Broker().URL())
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
