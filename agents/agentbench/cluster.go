package agentbench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events/eventbench"
)

// TargetClusterThroughput is the least routed throughput of a cluster whose
// streams have a copy on each member, over one server's, same run.
const TargetClusterThroughput = 0.4

// RouteCluster measures the routed path (as Route does: append -> Guide ->
// agent -> reply appended) on a cluster of replicas embedded servers routed
// to each other on loopback, SYLK and SYLK_DLQ with replicas copies, against
// the same on one server, in each sync mode: throughput (target
// TargetClusterThroughput) and the p50 and p99 latencies at a steady rate,
// reported beside it. The agents and the client use the first member; the
// stream leader is whichever member the cluster elects.
func RouteCluster(ctx context.Context, cfg RouteConfig, replicas int, progress func(string)) ([]eventbench.Comparison, error) {
	if replicas < 2 {
		return nil, fmt.Errorf("cluster benchmark: --replicas %d: a cluster has at least 2 servers (3 survives losing one)", replicas)
	}
	cfg.ensureDefaults()
	var out []eventbench.Comparison
	for _, mode := range cfg.SyncModes {
		report := func(s string) { say(progress, fmt.Sprintf("sync %s: %s", mode, s)) }
		report("one server: the routed path, then its latency")
		one, err := broker.Start(ctx, broker.Options{DataDir: filepath.Join(cfg.DataDir, "one-"+mode), Listen: broker.ListenNone, Sync: mode, NoAuth: true, Name: "bench"})
		if err != nil {
			return nil, err
		}
		oneTput, oneLat, err := routedRuns(ctx, cfg, one)
		one.Close()
		if err != nil {
			return nil, fmt.Errorf("sync %s, one server: %w", mode, err)
		}
		report(fmt.Sprintf("%d servers, %d copies of each stream: the routed path, then its latency", replicas, replicas))
		members, err := startCluster(ctx, filepath.Join(cfg.DataDir, "cluster-"+mode), replicas, mode)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		clTput, clLat, err := routedRuns(ctx, cfg, members[0])
		for _, m := range members {
			m.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("sync %s, %d servers: %w", mode, replicas, err)
		}
		name := fmt.Sprintf("%d servers x %d replicas vs one server (sync %s)", replicas, replicas, mode)
		out = append(out,
			eventbench.Compare("routed path, "+name, clTput, oneTput, TargetClusterThroughput),
			latencyComparison("routed p50 latency, "+name, "cluster", clLat, "one server", oneLat, 0.50, 0),
			latencyComparison("routed p99 latency, "+name, "cluster", clLat, "one server", oneLat, 0.99, 0),
		)
	}
	return out, nil
}

// routedRuns runs the Guide and the answering agent on b, then the routed
// path as fast as it goes and, at cfg.LatencyRate, its latency.
func routedRuns(ctx context.Context, cfg RouteConfig, b *broker.Broker) (eventbench.Measure, []time.Duration, error) {
	stop, err := startAgents(ctx, cfg, b.Options().Sync, func(string) jetstream.JetStream { return b.JetStream() })
	if err != nil {
		return eventbench.Measure{}, nil, err
	}
	defer stop()
	tput, _, err := routed(ctx, b, cfg.Messages, nil, nil)
	if err != nil {
		return tput, nil, err
	}
	_, lat, err := routed(ctx, b, cfg.LatencyMessages, newPacer(cfg.LatencyRate), nil)
	return tput, lat, err
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
	stop, err := startAgents(ctx, cfg, b.Options().Sync, func(string) jetstream.JetStream { return b.JetStream() })
	if err != nil {
		return eventbench.Measure{}, err
	}
	defer stop()
	m, _, err := routed(ctx, b, n, nil, cfg.Settle)
	return m, err
}
