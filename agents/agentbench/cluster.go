package agentbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events/eventbench"
)

// TargetClusterThroughput is the least routed throughput of a cluster whose
// streams have a copy on each member, over one server's, same run.
const TargetClusterThroughput = 0.4

// clusterRounds is how many paired rounds the cluster and the one server
// take: both run side by side, each round measures one then the other back
// to back, and the ratio is the median of the rounds', so a burst of the
// shared machine's load moves one round, not the comparison. Measured one
// after the other, once each, three runs at load 19-25 gave 0.86, 0.43 and
// 0.51.
const clusterRounds = 5

// RouteCluster measures the routed path (as Route does: append -> Guide ->
// agent -> reply appended) on a cluster of replicas embedded servers routed
// to each other on loopback, SYLK and SYLK_DLQ with replicas copies, against
// the same on one server, in each sync mode: throughput in paired rounds
// (target TargetClusterThroughput) and the p50 and p99 latencies at a steady
// rate, reported beside it. The agents and the client use the first member,
// which is made the leader of the stream and of the agents' consumers (see
// leadOn); the cluster's measure names the leaders as the run ended.
func RouteCluster(ctx context.Context, cfg RouteConfig, replicas int, progress func(string)) ([]eventbench.Comparison, error) {
	if replicas < 2 {
		return nil, fmt.Errorf("cluster benchmark: --replicas %d: a cluster has at least 2 servers (3 survives losing one)", replicas)
	}
	cfg.ensureDefaults()
	var out []eventbench.Comparison
	for _, mode := range cfg.SyncModes {
		cs, err := clusterMode(ctx, cfg, replicas, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}

func clusterMode(ctx context.Context, cfg RouteConfig, replicas int, mode string, progress func(string)) ([]eventbench.Comparison, error) {
	report := func(s string) { say(progress, fmt.Sprintf("sync %s: %s", mode, s)) }
	report(fmt.Sprintf("starting one server, and %d servers with %d copies of each stream", replicas, replicas))
	one, err := broker.Start(ctx, broker.Options{DataDir: filepath.Join(cfg.DataDir, "one-"+mode), Listen: broker.ListenNone, Sync: mode, NoAuth: true, Name: "bench"})
	if err != nil {
		return nil, err
	}
	defer one.Close()
	members, err := startCluster(ctx, filepath.Join(cfg.DataDir, "cluster-"+mode), replicas, mode)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	client := members[0]
	for _, b := range []*broker.Broker{one, client} {
		stop, err := startAgentsOn(ctx, cfg, b)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	report("moving the leaders of SYLK and of the agents' consumers to the member the client and the agents use")
	if err := leadOn(ctx, client); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%d servers x %d replicas vs one server (sync %s)", replicas, replicas, mode)
	tput, err := eventbench.Paired("routed path, "+name, clusterRounds, TargetClusterThroughput,
		routedRounds(ctx, client, cfg.Messages, clusterRounds, fmt.Sprintf("%d servers", replicas), report),
		routedRounds(ctx, one, cfg.Messages, clusterRounds, "one server", report))
	if err != nil {
		return nil, err
	}
	rate := cfg.latencyRate(tput.Sylk, tput.Baseline)
	report(fmt.Sprintf("latency: %d routed at %d/s on the cluster, then on one server", cfg.LatencyMessages, rate))
	_, clLat, err := routed(ctx, client, cfg.LatencyMessages, newPacer(rate), nil)
	if err != nil {
		return nil, fmt.Errorf("%d servers: %w", replicas, err)
	}
	_, oneLat, err := routed(ctx, one, cfg.LatencyMessages, newPacer(rate), nil)
	if err != nil {
		return nil, fmt.Errorf("one server: %w", err)
	}
	where, err := leaders(ctx, client)
	if err != nil {
		return nil, err
	}
	tput.Sylk.Name += " (" + where + ")"
	tput.Sylk, tput.Baseline = withLatency(tput.Sylk, clLat), withLatency(tput.Baseline, oneLat)
	return []eventbench.Comparison{
		tput,
		latencyComparison("routed p50 latency, "+name, rate, "cluster", clLat, "one server", oneLat, 0.50, 0),
		latencyComparison("routed p99 latency, "+name, rate, "cluster", clLat, "one server", oneLat, 0.99, 0),
	}, nil
}

// routedAgents are the agents the routed path runs: their consumers are
// what leadOn places.
var routedAgents = []string{guide.Name, "librarian"}

// leadOn moves the leadership of SYLK and of the agents' consumers to member
// b, the one the client and the agents use, and returns once b leads them
// all. Left to the election, the leaders fell anywhere, and a run whose
// every leader was on another member spent up to 1.4 times the CPU per
// message of one whose leaders were all on b (every publish, delivery and
// ack crossing a route twice, all on the same two cores): runs compared
// different clusters. Placed, each run measures the same thing, the cost of
// keeping three copies.
func leadOn(ctx context.Context, b *broker.Broker) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := agents.AwaitConsumers(ctx, b.JetStream(), routedAgents, 10*time.Millisecond, nil); err != nil {
		return err
	}
	name := b.ServerName()
	groups := []string{"STREAM.LEADER.STEPDOWN." + broker.Stream}
	for _, agent := range routedAgents {
		groups = append(groups, "CONSUMER.LEADER.STEPDOWN."+broker.Stream+"."+agents.ConsumerName(agent))
	}
	req, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": name}})
	if err != nil {
		return err
	}
	for i, group := range groups {
		refused := "" // the server's last answer, if it refused a move
		for {
			// A request sent during an election may never be answered:
			// each is bounded, and an unanswered one asked again.
			actx, acancel := context.WithTimeout(ctx, leadAttempt)
			leader, err := groupLeader(actx, b.JetStream(), i)
			acancel()
			if broker.Unanswered(ctx, err) {
				leader, err = "", nil // an election is on
			}
			if err != nil {
				return fmt.Errorf("move the leader of %s to %s: %w", group, name, err)
			}
			if leader == name {
				break
			}
			// With no leader, an election is on: wait for its outcome.
			if leader != "" {
				actx, acancel := context.WithTimeout(ctx, leadAttempt)
				resp, err := b.Conn().RequestWithContext(actx, "$JS.API."+group, req)
				acancel()
				switch {
				case broker.Unanswered(ctx, err):
				case err != nil:
					return fmt.Errorf("move the leader of %s to %s (led by %s): %w", group, name, leader, err)
				default:
					var answer struct {
						Error *jetstream.APIError `json:"error"`
					}
					if json.Unmarshal(resp.Data, &answer) == nil && answer.Error != nil {
						refused = "; the server answered: " + answer.Error.Error()
					}
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("move the leader of %s to %s (led by %q%s): %w", group, name, leader, refused, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// leadAttempt bounds one request of leadOn.
const leadAttempt = 2 * time.Second

// groupLeader is the leader of SYLK (i = 0) or of routedAgents[i-1]'s
// consumer: "" while none is elected.
func groupLeader(ctx context.Context, js jetstream.JetStream, i int) (string, error) {
	var ci *jetstream.ClusterInfo
	if i == 0 {
		s, err := js.Stream(ctx, broker.Stream)
		if err != nil {
			return "", err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return "", err
		}
		ci = info.Cluster
	} else {
		c, err := js.Consumer(ctx, broker.Stream, agents.ConsumerName(routedAgents[i-1]))
		if err != nil {
			return "", err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return "", err
		}
		ci = info.Cluster
	}
	if ci == nil {
		return "", nil
	}
	return ci.Leader, nil
}

// leaders says which members lead SYLK and the agents' consumers, beside
// the one the client and the agents use (b), as the run ended.
func leaders(ctx context.Context, b *broker.Broker) (string, error) {
	parts := []string{"client on " + b.ServerName()}
	for i := range len(routedAgents) + 1 {
		leader, err := groupLeader(ctx, b.JetStream(), i)
		if err != nil {
			return "", err
		}
		what := broker.Stream
		if i > 0 {
			what = routedAgents[i-1] + "'s consumer"
		}
		parts = append(parts, what+" led by "+leader)
	}
	return strings.Join(parts, ", "), nil
}

// startCluster starts n embedded servers in dir, routed to each other on
// loopback, with n copies of each stream. They start together: a member
// waits for a majority before it provisions the streams.
func startCluster(ctx context.Context, dir string, n int, mode string) ([]*broker.Broker, error) {
	addrs, err := broker.FreeLoopbackAddrs(n)
	if err != nil {
		return nil, err
	}
	members := make([]*broker.Broker, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		var routes []string
		for j, a := range addrs {
			if j != i {
				routes = append(routes, a)
			}
		}
		opts := broker.Options{
			DataDir: filepath.Join(dir, fmt.Sprintf("m%d", i)), Listen: "127.0.0.1:0", Sync: mode, NoAuth: true, Name: "bench", Replicas: n,
			Cluster: broker.Cluster{Name: "bench", Listen: addrs[i], Routes: routes},
		}
		wg.Go(func() { members[i], errs[i] = broker.Start(ctx, opts) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range members {
			if m != nil {
				m.Close()
			}
		}
		return nil, fmt.Errorf("start a cluster of %d: %w", n, err)
	}
	return members, nil
}

// RoutedPath runs the Guide and the answering agent on b and measures n
// routed messages, as fast as they go: the routed path of Route, for a
// caller that measures it with and without something beside it.
func RoutedPath(ctx context.Context, cfg RouteConfig, b *broker.Broker, n int) (eventbench.Measure, error) {
	cfg.ensureDefaults()
	stop, err := startAgentsOn(ctx, cfg, b)
	if err != nil {
		return eventbench.Measure{}, err
	}
	defer stop()
	m, _, err := routed(ctx, b, n, nil, cfg.Settle)
	return m, err
}
