package agentbench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

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
// rate, reported beside it. The agents and the client use the first member;
// the stream's and the consumers' leaders are whichever members the cluster
// elects, named in the cluster's measure.
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

// leaders says which members lead SYLK and the agents' consumers, beside
// the one the client and the agents use (b): what crosses a route depends on
// the election, so a run's figures are read with it.
func leaders(ctx context.Context, b *broker.Broker) (string, error) {
	js := b.JetStream()
	rs, err := broker.Replicas(ctx, js)
	if err != nil {
		return "", err
	}
	parts := []string{"client on " + b.ServerName(), "SYLK led by " + rs[0].Leader}
	for _, agent := range []string{guide.Name, "librarian"} {
		c, err := js.Consumer(ctx, broker.Stream, agents.ConsumerName(agent))
		if err != nil {
			return "", fmt.Errorf("consumer of %s: %w", agent, err)
		}
		if ci := c.CachedInfo().Cluster; ci != nil {
			parts = append(parts, agent+"'s consumer by "+ci.Leader)
		}
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
