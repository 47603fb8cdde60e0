package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func TestClusterOptionsAreChecked(t *testing.T) {
	addrs := []string{"127.0.0.1:6301", "127.0.0.1:6302", "127.0.0.1:6303"}
	for _, tc := range []struct {
		name string
		edit func(*broker.Options)
		want string
	}{
		{"more replicas than members", func(o *broker.Options) { o.Replicas = 4 }, "--replicas 4 but the cluster has 3 servers"},
		{"replicas without a cluster", func(o *broker.Options) { o.Cluster = broker.Cluster{}; o.Replicas = 3 }, "--replicas 3 needs a cluster"},
		{"a route to itself", func(o *broker.Options) { o.Cluster.Routes[1] = "localhost:6301" }, `--routes "localhost:6301" is this server's own --cluster-listen`},
		{"a route to its own advertised address", func(o *broker.Options) {
			o.Cluster.Advertise = "127.0.0.1:7301"
			o.Cluster.Routes[0] = "127.0.0.1:7301"
		}, `--routes "127.0.0.1:7301" is this server's own --cluster-advertise`},
		{"an advertised address without a port", func(o *broker.Options) { o.Cluster.Advertise = "proxy.example" }, `--cluster-advertise "proxy.example": want HOST:PORT`},
		{"routes without a listen address", func(o *broker.Options) { o.Cluster.Listen = "" }, "without --cluster-listen"},
		{"a listen address without routes", func(o *broker.Options) { o.Cluster.Routes = nil; o.Replicas = 1 }, "without --routes"},
		{"a bad route", func(o *broker.Options) { o.Cluster.Routes[0] = "http://x:1" }, `--routes "http://x:1"`},
		{"no fixed port", func(o *broker.Options) { o.Cluster.Listen = "127.0.0.1:0" }, "with a fixed port"},
		{"a cluster port open to the network", func(o *broker.Options) { o.Cluster.Listen = "0.0.0.0:6301" }, "--insecure"},
		{"an external server", func(o *broker.Options) { o.NATSURL = "nats://127.0.0.1:4222" }, "--nats-url nats://127.0.0.1:4222 runs no server here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := brokertest.ClusterOptions(t.TempDir(), addrs, 0, 3)
			tc.edit(&o)
			o.EnsureDefaults()
			err := o.Validate()
			if !errors.Is(err, broker.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestClusterReplicatesAndFailsOver runs three members with streams of three
// copies: a member started alone waits for its peers; each sees the other
// two; a client given every member's URL goes on appending when the stream
// leader's member stops, and no event is stored twice; the stopped member
// comes back; replicas change down and up, and a count the cluster cannot
// hold is refused with the reason.
func TestClusterReplicatesAndFailsOver(t *testing.T) {
	ctx := brokertest.Context(t)
	dirs := brokertest.ClusterDataDirs(t, 3, nil)
	addrs := brokertest.FreeAddrs(t, 3)

	// The first member, started alone, waits for a majority instead of failing.
	first := make(chan error, 1)
	var m0 *broker.Broker
	go func() {
		var err error
		m0, err = broker.Start(ctx, brokertest.ClusterOptions(dirs[0], addrs, 0, 3))
		first <- err
	}()
	brokertest.Eventually(t, 10*time.Second, "the first member's route listener", func() bool {
		c, err := net.Dial("tcp", addrs[0])
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	select {
	case err := <-first:
		t.Fatalf("the first member returned alone: %v", err)
	default:
	}
	rest := brokertest.StartMembers(t, dirs, addrs, []int{1, 2}, 3)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	members := []*broker.Broker{m0, rest[0], rest[1]}
	t.Cleanup(func() { m0.Close() })
	for i, b := range members {
		brokertest.Eventually(t, 10*time.Second, fmt.Sprintf("member %d sees two peers", i), func() bool { return len(b.Peers()) == 2 })
		if slices.Contains(b.Peers(), b.ServerName()) {
			t.Fatalf("member %s lists itself among its peers %v", b.ServerName(), b.Peers())
		}
	}
	reps, err := broker.Replicas(ctx, m0.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Replicas != 3 || r.Leader == "" || len(r.Peers) != 2 {
			t.Fatalf("stream %s: %+v, want 3 copies with a leader and two peers", r.Stream, r)
		}
	}

	// A client of the whole cluster, appending while the leader's member stops.
	var urls []string
	for _, b := range members {
		urls = append(urls, b.URL())
	}
	creds := m0.Auth().CredsPath(broker.AdminUser)
	client, err := broker.Connect(ctx, broker.Options{NATSURL: strings.Join(urls, ","), CredsFile: creds, Name: "failover-client"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	log := events.New(client.JetStream())
	event := func(i int) *schemas.Envelope {
		t.Helper()
		env, err := schemas.New(schemas.TypeSignal, "s-cluster", "user", "engineer", time.Now(), schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeSession, Reason: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		env.ID = fmt.Sprintf("ev-%04d", i)
		return env
	}
	appendN := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, err := log.Append(ctx, event(i)); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	appendN(0, 20)
	leader := slices.IndexFunc(members, func(b *broker.Broker) bool { return b.ServerName() == reps[0].Leader })
	if leader < 0 {
		t.Fatalf("leader %q is none of the members", reps[0].Leader)
	}
	// Appends in flight when the leader's member stops: some reach it and
	// are never answered. Each is stored once all the same.
	var pending []events.PendingAppend
	for i := 20; i < 40; i++ {
		p, err := log.AppendAsync(event(i))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	if err := members[leader].Close(); err != nil {
		t.Fatal(err)
	}
	wctx, cancelWait := context.WithTimeout(ctx, time.Minute)
	defer cancelWait()
	for i, p := range pending {
		if _, err := p.Wait(wctx); err != nil {
			t.Fatalf("append %d, in flight when the leader stopped: %v", 20+i, err)
		}
	}
	// The acks the dead leader never sent are not left pending in nats.go
	// for the connection's life.
	if n := client.JetStream().PublishAsyncPending(); n != 0 {
		t.Fatalf("%d appends still await an ack that will never come", n)
	}
	appendN(10, 20) // appended again: the stream keeps the first copies
	other := members[(leader+1)%3]
	s, err := other.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 40 {
		t.Fatalf("the stream holds %d events, want 40", info.State.Msgs)
	}

	// The stopped member comes back and catches up.
	back, err := broker.Start(ctx, brokertest.ClusterOptions(dirs[leader], addrs, leader, 3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close() })
	brokertest.Eventually(t, 20*time.Second, "every copy current again", func() bool {
		reps, err := broker.Replicas(ctx, back.JetStream())
		return err == nil && reps[0].Leader != "" && len(reps[0].Current) == 2
	})

	// Replicas change down and up; more than the cluster holds is refused.
	for _, n := range []int{1, 3} {
		if err := broker.SetReplicas(ctx, back.JetStream(), n); err != nil {
			t.Fatalf("replicas %d: %v", n, err)
		}
		brokertest.Eventually(t, 20*time.Second, fmt.Sprintf("%d copies", n), func() bool {
			reps, err := broker.Replicas(ctx, back.JetStream())
			return err == nil && reps[0].Replicas == n && len(reps[0].Current) == n-1 && reps[1].Replicas == n && len(reps[1].Current) == n-1
		})
	}
	err = broker.SetReplicas(ctx, back.JetStream(), 5)
	if err == nil || !strings.Contains(err.Error(), "fewer than 5 cluster members") {
		t.Fatalf("replicas 5 on 3 members: %v", err)
	}

	// A member left alone (the minority of a split) refuses appends, saying
	// why, and stores nothing.
	for i, b := range members {
		if i != leader {
			b.Close()
		}
	}
	alone := back
	minority, cancelMinority := context.WithTimeout(ctx, 3*time.Second)
	defer cancelMinority()
	env, _ := schemas.New(schemas.TypeSignal, "s-cluster", "user", "engineer", time.Now(), schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeSession})
	if _, err := events.New(alone.JetStream()).Append(minority, env); !errors.Is(err, events.ErrNoLeader) {
		t.Fatalf("append on a lone member: %v, want ErrNoLeader", err)
	}
}

func TestReplicasOnASingleServerAreExplained(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	err := broker.SetReplicas(context.Background(), b.JetStream(), 3)
	if err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Fatalf("replicas 3 on one server: %v", err)
	}
	if err := broker.SetReplicas(context.Background(), b.JetStream(), 0); !errors.Is(err, broker.ErrInvalidOptions) {
		t.Fatalf("replicas 0: %v", err)
	}
}
