package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Defaults.
const (
	DefaultListen = "127.0.0.1:4222"
	// ListenNone keeps the embedded server off the network: only the process that
	// started it can connect.
	ListenNone = "none"

	SyncAlways   = "always"
	SyncInterval = "interval"

	// DefaultSyncInterval is how often the interval mode flushes to disk.
	DefaultSyncInterval = 2 * time.Second
	// DefaultDuplicateWindow is how long the SYLK stream remembers envelope ids to
	// drop repeated appends.
	DefaultDuplicateWindow = 10 * time.Minute
	// DefaultConnectTimeout bounds start-up and connection attempts.
	DefaultConnectTimeout = 10 * time.Second
)

// ErrInvalidOptions is wrapped by every Options.Validate failure.
var ErrInvalidOptions = errors.New("invalid broker options")

// Options configure Start.
type Options struct {
	// DataDir holds the JetStream store, the lock and server.json. Required for an
	// embedded server.
	DataDir string
	// Listen is HOST:PORT for NATS clients, or ListenNone. Port 0 picks a free one.
	Listen string
	// Sync is SyncAlways (fsync before every publish ack) or SyncInterval.
	Sync string
	// SyncInterval is the flush period of SyncInterval mode.
	SyncInterval time.Duration
	// NATSURL, when set, connects to an external NATS server instead of starting
	// one; DataDir, Listen and Sync are then ignored.
	NATSURL string
	// Token, User+Password or CredsFile (a NATS .creds file) authenticate to
	// an external server. The embedded server authenticates every client with
	// the credentials it keeps in <data>/auth (see Auth).
	Token    string
	User     string
	Password string
	// CredsFile authenticates to an external server with a NATS credentials file.
	CredsFile string
	// TLSCert and TLSKey turn TLS on for the listener; TLSSelfSigned
	// generates a certificate in <data>/tls instead. A listener other
	// machines can reach needs one of them, or Insecure.
	TLSCert, TLSKey string
	TLSSelfSigned   bool
	Insecure        bool
	// tlsCA is the certificate to trust, from server.json.
	tlsCA string
	// NoAuth runs the embedded server without authentication: anyone who can
	// reach it may do anything. For benchmarks that measure what auth costs.
	NoAuth bool
	// DuplicateWindow of the SYLK stream.
	DuplicateWindow time.Duration
	// ConnectTimeout bounds start-up and connecting.
	ConnectTimeout time.Duration
	// Name identifies this process's connection in server monitoring.
	Name string
	// Cluster makes the embedded server a member of a cluster.
	Cluster Cluster
	// Replicas is the number of copies of SYLK and SYLK_DLQ a cluster keeps:
	// streams are created with it, and an existing stream is changed to it.
	// 0 creates streams with one copy and leaves existing ones as they are.
	Replicas int
	// MaxBytes is the SYLK stream's disk quota (0: none): once full, the
	// server refuses new events (ErrQuotaFull in package events). Set at
	// each start, on an existing stream too.
	MaxBytes int64
	// Memory keeps the embedded server's streams in memory, not in DataDir:
	// for a disposable server (a re-execution's), whose events are lost when
	// it stops. Nothing is written to disk, so nothing waits on it.
	Memory bool
	// DeferInfo holds server.json back until PublishInfo: for a server whose
	// clients need more than the broker (the query API) to be up first.
	DeferInfo bool
}

// DefaultDataDir is $SYLK_DATA, else $XDG_DATA_HOME/sylk, else ~/.local/share/sylk.
func DefaultDataDir() string {
	if d := os.Getenv("SYLK_DATA"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "sylk")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "sylk")
	}
	return filepath.Join(home, ".local", "share", "sylk")
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.DataDir == "" && o.NATSURL == "" {
		o.DataDir = DefaultDataDir()
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Sync == "" {
		o.Sync = SyncAlways
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Name == "" {
		o.Name = "sylk"
	}
	return o
}

// Validate reports the first unusable setting, naming the option and its value.
func (o *Options) Validate() error {
	if o.Sync != SyncAlways && o.Sync != SyncInterval {
		return fmt.Errorf("%w: --sync %q: use %q (fsync before every ack) or %q (flush every %s)", ErrInvalidOptions, o.Sync, SyncAlways, SyncInterval, o.SyncInterval)
	}
	if o.Memory && (o.NATSURL != "" || o.Cluster.Enabled()) {
		return fmt.Errorf("%w: Memory keeps an embedded server's streams in memory: it takes neither --nats-url nor --cluster-listen", ErrInvalidOptions)
	}
	if o.NATSURL != "" {
		if o.Cluster.Enabled() {
			return fmt.Errorf("%w: --nats-url %s runs no server here, so --cluster-listen and --routes have nothing to configure: drop them, or drop --nats-url", ErrInvalidOptions, o.NATSURL)
		}
		return o.validateClientAuth()
	}
	if o.DataDir == "" {
		return fmt.Errorf("%w: no data directory: set --data or $SYLK_DATA", ErrInvalidOptions)
	}
	if o.Listen != ListenNone {
		if _, _, err := splitListen(o.Listen); err != nil {
			return fmt.Errorf("%w: --listen %q: want HOST:PORT or %q: %w", ErrInvalidOptions, o.Listen, ListenNone, err)
		}
	}
	if err := o.validateTLS(); err != nil {
		return err
	}
	if err := o.validateCluster(); err != nil {
		return err
	}
	if o.Token != "" || o.User != "" || o.Password != "" || o.CredsFile != "" {
		return fmt.Errorf("%w: a token, user or credentials file is for --nats-url (an external server); the embedded server authenticates clients with the credentials in %s", ErrInvalidOptions, filepath.Join(o.DataDir, AuthDir))
	}
	return nil
}

// validateClientAuth checks the credentials given for an external server.
func (o *Options) validateClientAuth() error {
	if o.Token != "" && (o.User != "" || o.Password != "") {
		return fmt.Errorf("%w: use a token or a user and password, not both", ErrInvalidOptions)
	}
	if (o.User == "") != (o.Password == "") {
		return fmt.Errorf("%w: a user needs a password and a password a user", ErrInvalidOptions)
	}
	return nil
}

func splitListen(listen string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", portStr)
	}
	return host, port, nil
}
