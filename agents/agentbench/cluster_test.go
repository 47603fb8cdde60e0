package agentbench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sylk/sylk/broker"
)

// TestRouteCluster runs the cluster benchmark small: the throughput of three
// servers with three copies against one server's in paired rounds, with its
// target, the leaders on the client's member and named, and the two latencies beside it, sampled at
// a rate both sides sustain, every message through on both sides.
func TestRouteCluster(t *testing.T) {
	cs, err := RouteCluster(context.Background(), RouteConfig{DataDir: t.TempDir(), Messages: 200, LatencyMessages: 50, SyncModes: []string{broker.SyncInterval}}, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d comparisons, want 3: %v", len(cs), cs)
	}
	for i, want := range []struct {
		prefix string
		target float64
		ops    int
	}{{"routed path, 3 servers x 3 replicas", TargetClusterThroughput, clusterRounds * 200}, {"routed p50 latency, 3 servers", 0, 50}, {"routed p99 latency, 3 servers", 0, 50}} {
		c := cs[i]
		if !strings.HasPrefix(c.Name, want.prefix) || c.Target != want.target || c.Ratio <= 0 || c.Sylk.Ops != want.ops || c.Baseline.Ops != want.ops {
			t.Errorf("comparison %d: %q target %v ratio %v, %d and %d ops; want %q..., target %v, a ratio > 0, %d ops each",
				i, c.Name, c.Target, c.Ratio, c.Sylk.Ops, c.Baseline.Ops, want.prefix, want.target, want.ops)
		}
	}
	tput := cs[0]
	checkPaired(t, tput, clusterRounds, 200)
	// The client's member leads the stream and both consumers.
	client, _, _ := strings.Cut(strings.TrimPrefix(tput.Sylk.Name[strings.Index(tput.Sylk.Name, "(client on "):], "(client on "), ",")
	for _, group := range []string{"SYLK", "guide's consumer", "librarian's consumer"} {
		if want := group + " led by " + client; client == "" || !strings.Contains(tput.Sylk.Name, want) {
			t.Errorf("the cluster's measure %q does not say %q", tput.Sylk.Name, want)
		}
	}
	if tput.Sylk.P99MS <= 0 || tput.Baseline.P99MS <= 0 {
		t.Errorf("throughput without latencies beside it: cluster p99 %v ms, one server %v ms", tput.Sylk.P99MS, tput.Baseline.P99MS)
	}
	// No --latency-rate: latencies are sampled at half the slower side's
	// throughput, which both sustain.
	rate := int(min(tput.Sylk.PerSec, tput.Baseline.PerSec) / 2)
	if want := fmt.Sprintf(" at %d/s", rate); !strings.HasSuffix(cs[1].Sylk.Name, want) || !strings.HasSuffix(cs[2].Baseline.Name, want) {
		t.Errorf("latencies %q and %q, want them sampled%s", cs[1].Sylk.Name, cs[2].Baseline.Name, want)
	}
	if _, err := RouteCluster(context.Background(), RouteConfig{DataDir: t.TempDir()}, 1, nil); err == nil || !strings.Contains(err.Error(), "--replicas 1") {
		t.Errorf("a cluster of one: %v, want an error naming --replicas 1", err)
	}
}
