package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultClusterName is the cluster name when a cluster is configured without one.
const DefaultClusterName = "sylk"

// routeUser is the user name routes between members authenticate with; the
// password derives from the operator key every member shares (see routeAuth).
const routeUser = "sylk-route"

// Cluster makes the embedded server a member of a NATS cluster: the servers
// route to each other, and JetStream replicates the streams over them (the
// stream's Replicas). Every member has the same Name and the same
// <data>/auth (copied from the first member before the others start), and
// lists the others in Routes.
type Cluster struct {
	// Name of the cluster, the same on every member (DefaultClusterName).
	Name string `yaml:"name" json:"name"`
	// Listen is HOST:PORT where the other members connect.
	Listen string `yaml:"listen" json:"listen"`
	// Routes are the other members' addresses (their Advertise, or their
	// Listen), HOST:PORT or nats-route://HOST:PORT.
	Routes []string `yaml:"routes" json:"routes"`
	// Advertise is HOST:PORT where the other members reach this one when
	// that is not Listen (a NAT, a proxy in between): the members tell each
	// other of their peers by it. Empty: Listen.
	Advertise string `yaml:"advertise,omitempty" json:"advertise,omitempty"`
}

// Enabled reports whether a cluster is configured.
func (c Cluster) Enabled() bool { return c.Listen != "" || len(c.Routes) > 0 }

// Size is the number of members the configuration names: this server and
// its routes.
func (c Cluster) Size() int { return 1 + len(c.Routes) }

// validate checks the cluster settings and the replica count against them.
func (o *Options) validateCluster() error {
	c := o.Cluster
	if o.Replicas < 0 {
		return fmt.Errorf("%w: --replicas %d: want 1 or more copies of each stream", ErrInvalidOptions, o.Replicas)
	}
	if !c.Enabled() {
		if o.Replicas > 1 {
			return fmt.Errorf("%w: --replicas %d needs a cluster of at least %d servers: give --cluster-listen HOST:PORT and --routes to the other members", ErrInvalidOptions, o.Replicas, o.Replicas)
		}
		return nil
	}
	if c.Listen == "" {
		return fmt.Errorf("%w: --routes %s without --cluster-listen: a member needs the HOST:PORT the others route to", ErrInvalidOptions, strings.Join(c.Routes, ","))
	}
	host, port, err := splitListen(c.Listen)
	if err != nil || port == 0 {
		return fmt.Errorf("%w: --cluster-listen %q: want HOST:PORT with a fixed port (the other members' --routes name it)", ErrInvalidOptions, c.Listen)
	}
	if !Loopback(host) && !o.Insecure {
		return fmt.Errorf("%w: --cluster-listen %q is reachable from other machines and routes carry events in clear text: use a private network and give --insecure to accept it", ErrInvalidOptions, c.Listen)
	}
	if c.Advertise != "" {
		if _, port, err := splitListen(c.Advertise); err != nil || port == 0 {
			return fmt.Errorf("%w: --cluster-advertise %q: want HOST:PORT, the address the other members reach this one at", ErrInvalidOptions, c.Advertise)
		}
	}
	if len(c.Routes) == 0 {
		return fmt.Errorf("%w: --cluster-listen %s without --routes: name the other members (HOST:PORT,...)", ErrInvalidOptions, c.Listen)
	}
	for _, r := range c.Routes {
		u, err := routeURL(r)
		if err != nil {
			return fmt.Errorf("%w: --routes %q: %w", ErrInvalidOptions, r, err)
		}
		if sameAddress(u.Host, c.Listen) {
			return fmt.Errorf("%w: --routes %q is this server's own --cluster-listen %s: list the other members only", ErrInvalidOptions, r, c.Listen)
		}
		if c.Advertise != "" && sameAddress(u.Host, c.Advertise) {
			return fmt.Errorf("%w: --routes %q is this server's own --cluster-advertise %s: list the other members only", ErrInvalidOptions, r, c.Advertise)
		}
	}
	if o.Replicas > c.Size() {
		return fmt.Errorf("%w: --replicas %d but the cluster has %d servers (this one and %d --routes): ask for at most %d, or add members", ErrInvalidOptions, o.Replicas, c.Size(), len(c.Routes), c.Size())
	}
	return nil
}

// routeURL reads a route: HOST:PORT or nats-route://HOST:PORT.
func routeURL(r string) (*url.URL, error) {
	if !strings.Contains(r, "://") {
		r = "nats-route://" + r
	}
	u, err := url.Parse(r)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "nats-route" || u.Hostname() == "" || u.Port() == "" {
		return nil, errors.New("want HOST:PORT or nats-route://HOST:PORT")
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("port %q is not a number from 1 to 65535", u.Port())
	}
	return u, nil
}

// sameAddress reports whether a and b (HOST:PORT) name the same listener on
// this machine: same port, and the same host or both local.
func sameAddress(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb {
		return false
	}
	local := func(h string) bool {
		ip := net.ParseIP(h)
		return Loopback(h) || (ip != nil && ip.IsUnspecified())
	}
	return ha == hb || (local(ha) && local(hb))
}

// serverName is the member's name in the cluster: stable across restarts
// (JetStream's replica groups know their peers by it) and unique.
func (c Cluster) serverName() string {
	return "sylk-" + strings.NewReplacer(":", "-", "[", "", "]", "").Replace(c.Listen)
}

// routeAuth is the route credential: a password derived from the operator
// seed, so only members holding the same <data>/auth can join.
func (a *Auth) routeAuth() (user, password string) {
	seed, _ := a.operator.Seed()
	sum := sha256.Sum256(append([]byte("sylk cluster route\x00"), seed...))
	return routeUser, hex.EncodeToString(sum[:16])
}

// clusterOptions adds the cluster to the server options.
func (b *Broker) clusterOptions(sopts *server.Options) error {
	c := b.opts.Cluster
	if c.Name == "" {
		c.Name = DefaultClusterName
	}
	host, port, _ := splitListen(c.Listen)
	sopts.ServerName = c.serverName()
	sopts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: port, Advertise: c.Advertise, ConnectRetries: -1}
	var user, password string
	if b.auth != nil {
		user, password = b.auth.routeAuth()
		sopts.Cluster.Username, sopts.Cluster.Password = user, password
	}
	for _, r := range c.Routes {
		u, err := routeURL(r)
		if err != nil {
			return err
		}
		if user != "" {
			u.User = url.UserPassword(user, password)
		}
		sopts.Routes = append(sopts.Routes, u)
	}
	return nil
}

// Peers are the names of the other cluster members this server has a route
// to, sorted; nil outside a cluster or for an external server.
func (b *Broker) Peers() []string {
	if b.srv == nil {
		return nil
	}
	rz, err := b.srv.Routez(nil)
	if err != nil {
		return nil
	}
	var names []string
	for _, r := range rz.Routes {
		if r.RemoteName != "" && !slices.Contains(names, r.RemoteName) {
			names = append(names, r.RemoteName)
		}
	}
	slices.Sort(names)
	return names
}

// ServerName is the embedded server's name (its cluster member name); "" for
// an external server.
func (b *Broker) ServerName() string {
	if b.srv == nil {
		return ""
	}
	return b.srv.Name()
}

// Unanswered reports whether err is one JetStream request's own deadline
// while ctx, its caller's, is still live. A request sent while a cluster
// elects a leader (a member just stopped) is never answered: callers bound
// each attempt below their own deadline and, unanswered, ask again.
func Unanswered(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
}

// clusterProgress is how often a member waiting for its cluster says so;
// clusterAttempt bounds each attempt to provision the streams.
const (
	clusterProgress = 3 * time.Second
	clusterAttempt  = 2 * time.Second
)

// provisionInCluster provisions the streams once the cluster can: JetStream
// needs a meta leader (a majority of the members) and as many live members
// as the streams' replicas. A member started before its peers waits, saying
// every few seconds which peers it sees, until ctx ends.
func (b *Broker) provisionInCluster(ctx context.Context) error {
	want := b.opts.Cluster.Size() - 1
	last := time.Now()
	for {
		actx, cancel := context.WithTimeout(ctx, clusterAttempt)
		err := ProvisionStreams(actx, b.js, b.opts.DuplicateWindow, b.opts.Replicas, b.opts.MaxBytes)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster %s never became ready (%d of %d peers seen: %s): %w", b.opts.Cluster.Name, len(b.Peers()), want, strings.Join(b.Peers(), ", "), err)
		}
		if time.Since(last) >= clusterProgress {
			last = time.Now()
			slog.Warn("waiting for the cluster: its streams need a majority of the members and as many as --replicas",
				"server", b.srv.Name(), "peers_seen", len(b.Peers()), "peers_configured", want, "peers", strings.Join(b.Peers(), ","),
				"hint", "start the other members; each needs the same <data>/auth as the first", "last_error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// SetReplicas changes the number of copies of the SYLK and SYLK_DLQ streams
// on a running cluster. The servers copy the data to the new replicas (or
// drop it from the removed ones) in the background.
func SetReplicas(ctx context.Context, js jetstream.JetStream, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: replicas %d: want 1 or more copies of each stream", ErrInvalidOptions, n)
	}
	for _, name := range []string{Stream, DLQStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Replicas == n {
			continue
		}
		from := max(cfg.Replicas, 1)
		cfg.Replicas = n
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: replicas %d to %d: %w", name, from, n, explainReplicas(err, n))
		}
	}
	return nil
}

// explainReplicas says what a refused replica count means.
func explainReplicas(err error, n int) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return err
	}
	switch api.ErrorCode {
	case errCodeReplicasNotSupported:
		return fmt.Errorf("%w: the server is not in a cluster, so its streams have one copy: start it as a cluster member (--cluster-listen, --routes)", err)
	case errCodeInsufficientResources, errCodeNoSuitablePeers:
		return fmt.Errorf("%w: fewer than %d cluster members with JetStream are up: start more members or ask for fewer replicas", err, n)
	}
	return err
}

// JetStream API error codes Sylk explains.
const (
	errCodeInsufficientResources = 10023
	errCodeNoSuitablePeers       = 10005
	errCodeReplicasNotSupported  = 10074
)

// StreamReplicas describes where a stream's copies are.
type StreamReplicas struct {
	Stream   string   `json:"stream"`
	Replicas int      `json:"replicas"`
	Leader   string   `json:"leader,omitempty"`
	Peers    []string `json:"peers,omitempty"`
	Current  []string `json:"current,omitempty"` // the peers up to date with the leader
}

// Replicas reports the copies of SYLK and SYLK_DLQ.
func Replicas(ctx context.Context, js jetstream.JetStream) ([]StreamReplicas, error) {
	var out []StreamReplicas
	for _, name := range []string{Stream, DLQStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		r := StreamReplicas{Stream: name, Replicas: max(info.Config.Replicas, 1)}
		if ci := info.Cluster; ci != nil {
			r.Leader = ci.Leader
			for _, p := range ci.Replicas {
				r.Peers = append(r.Peers, p.Name)
				if p.Current {
					r.Current = append(r.Current, p.Name)
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// FreeLoopbackAddrs returns n loopback HOST:PORT addresses free at the time of
// the call: for the route listeners of a cluster on one machine, whose
// members name each other before they start.
func FreeLoopbackAddrs(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
