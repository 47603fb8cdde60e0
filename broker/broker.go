package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Broker is a connection to a NATS server with JetStream and Sylk's streams
// provisioned: an embedded server this process runs, or an external one.
type Broker struct {
	opts Options
	auth *Auth          // nil unless this process runs the server with authentication
	srv  *server.Server // nil when connected to an external server
	lock *dirLock
	nc   *nats.Conn
	js   jetstream.JetStream
	url  string
	// client: connected by Connect, which leaves existing streams alone.
	client bool

	tlsCA, tlsFingerprint string // the self-signed certificate clients trust
	httpURL               string // the HTTP listener server.json advertises
}

// Start starts an embedded server on opts.DataDir (or, with opts.NATSURL, connects
// to an external one), connects to it, provisions the streams and, when the
// server listens, writes server.json. It fails at once with ErrLocked if another
// server owns the data directory.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.NATSURL != "" {
		return dial(ctx, opts, opts.NATSURL, true)
	}
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	// A server.json left by a crash must not pass for this server's while it
	// starts: clients would read the dead one's address.
	if err := os.Remove(filepath.Join(opts.DataDir, InfoFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errors.Join(err, lock.release())
	}
	b := &Broker{opts: opts, lock: lock}
	if err := b.startEmbedded(ctx); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

// Connect reaches the server that owns opts.DataDir, as recorded in its
// server.json, or the external server of opts.NATSURL. It does not start one: it
// returns ErrNoServer when nothing is running. A client makes the streams when
// they are missing and never changes existing ones: their configuration (the
// disk quota, say) is the server's, and a command run with another config
// file must not undo it.
func Connect(ctx context.Context, opts Options) (*Broker, error) {
	opts.EnsureDefaults()
	if opts.NATSURL != "" {
		return dial(ctx, opts, opts.NATSURL, false)
	}
	info, err := ReadInfo(opts.DataDir)
	if err != nil {
		return nil, err
	}
	opts.User, opts.Password, opts.Token, opts.CredsFile = info.User, info.Password, info.Token, info.Creds
	if opts.CredsFile != "" {
		if _, err := ReadCreds(opts.CredsFile); err != nil {
			return nil, fmt.Errorf("%s names credentials this process cannot use: %w", filepath.Join(opts.DataDir, InfoFile), err)
		}
	}
	opts.tlsCA = info.TLSCA
	return dial(ctx, opts, info.URL, false)
}

// Open connects to the server that owns the data directory if one is running,
// and starts an embedded one otherwise. started says which happened.
func Open(ctx context.Context, opts Options) (b *Broker, started bool, err error) {
	b, err = Connect(ctx, opts)
	if err == nil || !errors.Is(err, ErrNoServer) {
		return b, false, err
	}
	b, err = Start(ctx, opts)
	if errors.Is(err, ErrLocked) {
		// Another server won the race to start; use it.
		b, err = Connect(ctx, opts)
		return b, false, err
	}
	return b, err == nil, err
}

// dial connects to the server at url; owner (a server of Sylk's, not a
// client) brings existing streams to opts' configuration.
func dial(ctx context.Context, opts Options, url string, owner bool) (*Broker, error) {
	nopts := []nats.Option{nats.Name(opts.Name), nats.Timeout(opts.ConnectTimeout), nats.MaxReconnects(-1)}
	nopts = append(nopts, authOptions(opts)...)
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	b := &Broker{opts: opts, nc: nc, url: url, client: !owner}
	if err := b.setup(ctx); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

func authOptions(opts Options) []nats.Option {
	var out []nats.Option
	switch {
	case opts.Token != "":
		out = append(out, nats.Token(opts.Token))
	case opts.User != "":
		out = append(out, nats.UserInfo(opts.User, opts.Password))
	case opts.CredsFile != "":
		out = append(out, nats.UserCredentials(opts.CredsFile))
	}
	if opts.tlsCA != "" {
		out = append(out, nats.RootCAs(opts.tlsCA))
	}
	return out
}

// secure turns on decentralized JWT authentication for the embedded server:
// the operator and accounts of <data>/auth, created on the first start.
// The broker's own connections use the admin credential.
func (b *Broker) secure(sopts *server.Options) error {
	a, err := LoadAuth(b.opts.DataDir)
	if err != nil {
		return fmt.Errorf("credentials in %s: %w", filepath.Join(b.opts.DataDir, AuthDir), err)
	}
	if err := adoptGlobalStore(sopts.StoreDir, a.AccountPublicKey()); err != nil {
		return err
	}
	oc, err := jwt.DecodeOperatorClaims(a.opJWT)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(a.dir, "operator.jwt"), err)
	}
	res := &server.MemAccResolver{}
	if err := errors.Join(res.Store(a.sysPub, a.sysJWT), res.Store(a.accPub, a.accJWT)); err != nil {
		return err
	}
	sopts.TrustedOperators = []*jwt.OperatorClaims{oc}
	sopts.AccountResolver = res
	sopts.SystemAccount = a.sysPub
	b.auth = a
	b.opts.CredsFile = a.CredsPath(AdminUser)
	return nil
}

// adoptGlobalStore moves the streams of a data directory created before
// authentication (JetStream's global account $G) to the SYLK account's
// directory, where the server now looks for them.
func adoptGlobalStore(storeDir, account string) error {
	old, dst := filepath.Join(storeDir, "jetstream", "$G"), filepath.Join(storeDir, "jetstream", account)
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.Rename(old, dst); err != nil {
		return fmt.Errorf("move the stream store %s to the SYLK account: %w", old, err)
	}
	slog.Info("moved the stream store to the SYLK account", "from", old, "to", dst)
	return nil
}

func (b *Broker) startEmbedded(ctx context.Context) error {
	o := b.opts
	sopts := &server.Options{
		ServerName:   "sylk",
		JetStream:    true,
		StoreDir:     filepath.Join(o.DataDir, "jetstream"),
		NoSigs:       true,
		NoLog:        os.Getenv("SYLK_NATS_LOG") == "",
		SyncAlways:   o.Sync == SyncAlways,
		SyncInterval: o.SyncInterval,
		// Sylk's envelopes are small, but a tool result may not be.
		MaxPayload: 8 << 20,
		// A user JWT carries its role's permissions in the CONNECT line.
		MaxControlLine: 64 << 10,
	}
	if !o.NoAuth {
		if err := b.secure(sopts); err != nil {
			return err
		}
		o = b.opts
	}
	if o.Cluster.Enabled() {
		if err := b.clusterOptions(sopts); err != nil {
			return err
		}
	}
	if o.Listen == ListenNone {
		sopts.DontListen = true
	} else {
		host, port, _ := splitListen(o.Listen)
		if port == 0 {
			port = server.RANDOM_PORT // nats-server reads 0 as its default, 4222
		}
		sopts.Host, sopts.Port = host, port
		if err := b.withTLS(sopts); err != nil {
			return err
		}
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return fmt.Errorf("embedded NATS server: %w", err)
	}
	b.srv = srv
	if !sopts.NoLog {
		srv.ConfigureLogger()
	}
	srv.Start()
	if !srv.ReadyForConnections(o.ConnectTimeout) {
		return fmt.Errorf("embedded NATS server on %s not ready after %s", o.DataDir, o.ConnectTimeout)
	}
	nopts := append([]nats.Option{nats.Name(o.Name), nats.InProcessServer(srv)}, authOptions(o)...)
	nc, err := nats.Connect("", nopts...)
	if err != nil {
		return fmt.Errorf("connect to the embedded server: %w", err)
	}
	b.nc = nc
	if err := b.setup(ctx); err != nil {
		return err
	}
	if !sopts.DontListen {
		b.url = localURL(srv.ClientURL())
		if !o.DeferInfo {
			if err := b.PublishInfo(); err != nil {
				return err
			}
		}
	}
	slog.Debug("broker started", "data", o.DataDir, "url", b.url, "sync", o.Sync)
	return nil
}

// localURL is where this machine reaches a server listening on every
// interface: the loopback address.
func localURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	if ip := net.ParseIP(p.Hostname()); ip != nil && ip.IsUnspecified() {
		p.Host = net.JoinHostPort("127.0.0.1", p.Port())
	}
	return p.String()
}

// AckWait is how long an asynchronous publish waits for the stream's ack
// before giving it up: the member that got it may have died before answering
// (its stream leader, SIGKILLed), and nobody would ever answer it.
const AckWait = 5 * time.Second

// NewJetStream is the JetStream context of Sylk's clients on nc: an
// asynchronous publish unanswered after AckWait fails with
// jetstream.ErrAsyncPublishTimeout and leaves nats.go's table of pending acks,
// so lost acks do not pile up there (nor hold a stall) for the connection's
// life.
func NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc, jetstream.WithPublishAsyncTimeout(AckWait))
}

func (b *Broker) setup(ctx context.Context) error {
	js, err := NewJetStream(b.nc)
	if err != nil {
		return err
	}
	b.js = js
	if b.srv != nil && b.opts.Cluster.Enabled() {
		return b.provisionInCluster(ctx)
	}
	storage := jetstream.FileStorage
	if b.opts.Memory {
		storage = jetstream.MemoryStorage
	}
	return provisionStreams(ctx, js, b.opts.DuplicateWindow, b.opts.Replicas, b.opts.MaxBytes, storage, !b.client)
}

// PublishInfo writes server.json, which tells clients the server is up and how
// to reach it. Start does it, unless Options.DeferInfo.
func (b *Broker) PublishInfo() error {
	o := b.opts
	if b.srv == nil || b.url == "" {
		return nil
	}
	info := Info{URL: b.url, Creds: o.CredsFile, TLSCA: b.tlsCA, TLSFingerprint: b.tlsFingerprint, HTTP: b.httpURL, PID: os.Getpid(), DataDir: o.DataDir, StartedAt: time.Now().UTC()}
	if err := writeInfo(o.DataDir, info); err != nil {
		return fmt.Errorf("write %s: %w", InfoFile, err)
	}
	return nil
}

// AdvertiseHTTP sets the HTTP listener's URL that PublishInfo writes.
func (b *Broker) AdvertiseHTTP(url string) { b.httpURL = url }

// Conn is the NATS connection. It is owned by the Broker: do not close it.
func (b *Broker) Conn() *nats.Conn { return b.nc }

// JetStream is the JetStream context on Conn.
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// URL is where outside clients reach the server; "" for an embedded server that
// does not listen.
func (b *Broker) URL() string { return b.url }

// Embedded reports whether this process runs the server.
func (b *Broker) Embedded() bool { return b.srv != nil }

// Auth is the credential material of the embedded server; nil for an
// external server or one started with Options.NoAuth.
func (b *Broker) Auth() *Auth { return b.auth }

// TLSFingerprint is the SHA-256 fingerprint of the listener's certificate;
// "" without TLS.
func (b *Broker) TLSFingerprint() string { return b.tlsFingerprint }

// Options returns the options the broker runs with, defaults filled in.
func (b *Broker) Options() Options { return b.opts }

// NewConn opens another connection to the same server, for work that must not
// share the main connection (a consumer that may be cut off, a benchmark).
func (b *Broker) NewConn(name string) (*nats.Conn, error) {
	nopts := append([]nats.Option{nats.Name(name)}, authOptions(b.opts)...)
	if b.srv != nil {
		return nats.Connect("", append(nopts, nats.InProcessServer(b.srv))...)
	}
	return nats.Connect(b.url, nopts...)
}

// Close drains the connection, shuts an embedded server down, removes its
// server.json and releases the data directory.
func (b *Broker) Close() error {
	var errs []error
	if b.nc != nil {
		if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, err)
		}
		b.nc.Close()
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
		if b.url != "" {
			if err := os.Remove(filepath.Join(b.opts.DataDir, InfoFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		slog.Debug("broker stopped", "data", b.opts.DataDir)
	}
	if b.lock != nil {
		errs = append(errs, b.lock.release())
	}
	return errors.Join(errs...)
}

// ConnAs opens another connection to the embedded server with the
// credentials file creds: what a client of that role sees, in process.
func (b *Broker) ConnAs(name, creds string) (*nats.Conn, error) {
	if b.srv == nil {
		return nil, fmt.Errorf("ConnAs: not an embedded server")
	}
	return nats.Connect("", nats.Name(name), nats.InProcessServer(b.srv), nats.UserCredentials(creds))
}
