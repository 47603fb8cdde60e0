package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/audit"
)

// The chain the cluster tests run, and the agents of each of their three
// `sylk serve` processes: every agent runs in two processes at least,
// engineers in all three.
const clusterNodes = 40

var clusterAgents = []string{
	"guide,architect,orchestrator,inspector,engineer",
	"orchestrator,archivalist,librarian,tester,engineer",
	"guide,architect,archivalist,librarian,inspector,tester,engineer",
}

// TestClusterSurvivesLeaderKill runs three `sylk serve` processes as a
// cluster on loopback, with streams of three copies and the agents spread
// over them, runs a 40-node chain, SIGKILLs the process holding the stream
// leader mid-run and restarts it later. The DAG completes, each node's tool
// ran once (plus at most one repeat for the kill), the stream holds no
// envelope id twice, the DLQ is empty and every process's projections
// equal a rebuild.
func TestClusterSurvivesLeaderKill(t *testing.T) {
	t.Parallel() // a long end-to-end run of its own processes, ports and directories
	bin := sylkBinary(t)
	dirs := brokertest.ClusterDataDirs(t, 3, func(d string) error { _, err := audit.LoadKey(d); return err })
	work := filepath.Join(filepath.Dir(dirs[0]), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeChainPlan(t, work, clusterNodes, "0.05")

	addrs := brokertest.FreeAddrs(t, 6)
	routes, listen := addrs[:3], addrs[3:]
	args := func(i int) []string {
		return []string{"--listen", listen[i], "--sync", "always", "--ack-wait", "2s", "--cluster-name", "t",
			"--cluster-listen", routes[i], "--routes", othersOf(routes, i), "--replicas", "3", "--agents", clusterAgents[i]}
	}
	procs := launchMembers(t, bin, dirs, work, args)

	var urls []string
	for _, l := range listen {
		urls = append(urls, "nats://"+l)
	}
	client := connectCluster(t, broker.Options{NATSURL: strings.Join(urls, ","), CredsFile: filepath.Join(dirs[0], "auth", "users", "admin.creds")})
	var names []string
	for _, r := range routes {
		names = append(names, "sylk-"+strings.ReplaceAll(r, ":", "-"))
	}
	runChainThroughLeaderKill(t, bin, work, client, dirs[0], nil, names, func(i int) {
		procs[i].kill(t)
	}, func(i int) {
		procs[i] = launchServe(t, bin, dirs[i], work, args(i)...)
		procs[i].waitReady(t, dirs[i])
	})

	// Each process's projections equal a rebuild: stopped one at a time (two
	// members keep the stream up), verified against the cluster, restarted.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := events.New(client.JetStream())
	for i := range procs {
		// Stop a member only once every copy is current: with a follower
		// still catching up (the restarted one), stopping another leaves
		// the streams without a quorum.
		waitCopiesCurrent(ctx, t, client, len(procs), time.Minute)
		procs[i].stop(t)
		verifyStore(t, dirs[i], log)
		if i < len(procs)-1 {
			procs[i] = launchServe(t, bin, dirs[i], work, args(i)...)
			procs[i].waitReady(t, dirs[i])
		}
	}
}

// TestExternalNATSClusterSurvivesLeaderKill runs the same chain against
// three plain nats-server processes (a cluster built from the module Sylk
// embeds, streams of three copies) with three `sylk serve --roles
// projections,agents` processes attached, each failing over between all
// three servers. The server holding the stream leader is SIGKILLed mid-run
// and restarted later; the checks are those of the embedded cluster.
func TestExternalNATSClusterSurvivesLeaderKill(t *testing.T) {
	t.Parallel() // a long end-to-end run of its own processes, ports and directories
	bin, natsBin := sylkBinary(t), natsServerBinary(t)
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeChainPlan(t, work, clusterNodes, "0.05")

	addrs := brokertest.FreeAddrs(t, 6)
	var urls, routes, names []string
	for i := range 3 {
		urls = append(urls, "nats://"+addrs[i])
		routes = append(routes, "nats://"+addrs[3+i])
		names = append(names, fmt.Sprintf("ns%d", i))
	}
	natsArgs := func(i int) []string {
		host, port, _ := net.SplitHostPort(addrs[i])
		return []string{"--jetstream", "--store_dir", filepath.Join(root, names[i]), "--addr", host, "--port", port,
			"--server_name", names[i], "--cluster_name", "ext", "--cluster", routes[i], "--routes", strings.Join(routes, ",")}
	}
	servers := make([]*serveProc, 3)
	for i := range servers {
		servers[i] = launchProc(t, filepath.Join(root, names[i]+".log"), root, natsBin, natsArgs(i)...)
	}
	dirs := make([]string, 3)
	procs := make([]*serveProc, 3)
	t.Cleanup(func() {
		for _, p := range slices.Concat(procs, servers) {
			if p != nil {
				p.kill(t)
			}
		}
		if t.Failed() {
			for _, n := range names {
				dirs = append(dirs, filepath.Join(root, n))
			}
			dumpLogs(t, dirs...)
		}
	})
	// The test's client makes the streams, with three copies, once the
	// servers have a JetStream leader.
	all := strings.Join(urls, ",")
	client := connectCluster(t, broker.Options{NATSURL: all, Replicas: 3})

	for i := range procs {
		dirs[i] = filepath.Join(root, fmt.Sprintf("s%d", i))
		procs[i] = launchServe(t, bin, dirs[i], work, "--nats-url", all, "--roles", "projections,agents", "--ack-wait", "2s", "--agents", clusterAgents[i])
	}
	for i := range procs {
		brokertest.Eventually(t, time.Minute, fmt.Sprintf("serve %d up", i), func() bool {
			b, _ := os.ReadFile(dirs[i] + ".log")
			return strings.Contains(string(b), "sylk serving")
		})
	}

	runChainThroughLeaderKill(t, bin, work, client, dirs[0], []string{"--nats-url", all}, names, func(i int) {
		servers[i].kill(t)
	}, func(i int) {
		servers[i] = launchProc(t, filepath.Join(root, names[i]+".log"), root, natsBin, natsArgs(i)...)
	})

	// Each process's projections equal a rebuild of the stream.
	log := events.New(client.JetStream())
	for i, p := range procs {
		p.stop(t)
		verifyStore(t, dirs[i], log)
	}
}

// othersOf is addrs without the i-th, comma-separated: member i's --routes.
func othersOf(addrs []string, i int) string {
	return strings.Join(slices.Delete(slices.Clone(addrs), i, i+1), ",")
}

// launchMembers starts a `sylk serve` in each of dirs with args(i), waits
// for all to be ready, and kills them (showing their logs after a failure)
// when the test ends.
func launchMembers(t *testing.T, bin string, dirs []string, work string, args func(i int) []string) []*serveProc {
	t.Helper()
	procs := make([]*serveProc, len(dirs))
	for i := range procs {
		procs[i] = launchServe(t, bin, dirs[i], work, args(i)...)
	}
	for i, p := range procs {
		p.waitReady(t, dirs[i])
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill(t)
		}
		if t.Failed() {
			dumpLogs(t, dirs...)
		}
	})
	return procs
}

// waitCopiesCurrent waits, within d, until both streams have a leader and
// every other member's copy is current, as heard from since the wait began:
// the leader still counts a member stopped a moment ago as current (it
// forgets a peer only seconds after its last word), so a member restarted
// just before the wait must have spoken again.
func waitCopiesCurrent(ctx context.Context, t *testing.T, client *broker.Broker, members int, d time.Duration) {
	t.Helper()
	since := time.Now()
	brokertest.Eventually(t, d, "every copy of both streams current", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for _, name := range []string{broker.Stream, broker.DLQStream} {
			s, err := client.JetStream().Stream(rctx, name)
			if err != nil {
				return false
			}
			info, err := s.Info(rctx)
			if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != members-1 {
				return false
			}
			for _, p := range info.Cluster.Replicas {
				if !p.Current || p.Offline || p.Active >= time.Since(since) {
					return false
				}
			}
		}
		return true
	})
}

// connectCluster connects a client to a cluster's members, once they have
// a JetStream leader and can make the streams.
func connectCluster(t *testing.T, opts broker.Options) *broker.Broker {
	t.Helper()
	opts.Name = "cluster-test"
	var client *broker.Broker
	brokertest.Eventually(t, time.Minute, "a client of the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		client, err = broker.Connect(ctx, opts)
		return err == nil
	})
	t.Cleanup(func() { client.Close() })
	return client
}

// runChainThroughLeaderKill submits the chain plan of work (through the
// sylk of data, with flags), SIGKILLs the member holding the stream leader
// once ten nodes started (kill, by its index in names, the members' server
// names), waits for ten more to run without it, brings it back (restart)
// and checks the run: every node once plus at most one repeat, an empty
// DLQ, no envelope id stored twice.
func runChainThroughLeaderKill(t *testing.T, bin, work string, client *broker.Broker, data string, flags, names []string, kill, restart func(i int)) {
	t.Helper()
	const kills = 1
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	submitted := submitPlan(t, bin, data, work, flags...)
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, client)
		}
	})

	lines := filepath.Join(work, "lines.txt")
	brokertest.Eventually(t, time.Minute, "ten nodes started", func() bool { return len(readLines(t, lines)) >= 20 })
	reps, err := broker.Replicas(ctx, client.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	leader := slices.Index(names, reps[0].Leader)
	if leader < 0 {
		t.Fatalf("stream leader %q is none of the members %v", reps[0].Leader, names)
	}
	kill(leader)
	at := len(readLines(t, lines))
	t.Logf("killed member %d (%s, the stream leader) at %d lines", leader, reps[0].Leader, at)
	brokertest.Eventually(t, time.Minute, "ten more nodes without it", func() bool { return len(readLines(t, lines)) >= at+20 })
	restart(leader)

	checkChainRun(t, client.JetStream(), submitted.Session, work, clusterNodes, kills)

	evs, err := events.New(client.JetStream()).Read(ctx, events.Filter{}.Subject(), events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	for _, ev := range evs {
		if first, ok := seen[ev.Env.ID]; ok {
			t.Errorf("envelope %s stored twice: seq %d and %d", ev.Env.ID, first, ev.Seq)
		}
		seen[ev.Env.ID] = ev.Seq
	}
}

// dumpLogs writes the last lines of each process's log (<path>.log) to the
// test's output, for a failure to be read after the temporary directory
// is gone.
func dumpLogs(t *testing.T, paths ...string) {
	const keep = 60
	for _, p := range paths {
		b, err := os.ReadFile(p + ".log")
		if err != nil {
			t.Logf("%s.log: %v", p, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("the last %d lines of %s.log:\n%s", keep, filepath.Base(p), strings.Join(lines[max(0, len(lines)-keep):], "\n"))
	}
}

// dumpCluster writes what a stalled run is waiting on to the test's output:
// each consumer's state, and the stream's last events.
func dumpCluster(t *testing.T, client *broker.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := client.JetStream()
	s, err := js.Stream(ctx, broker.Stream)
	if err != nil {
		t.Logf("stream: %v", err)
		return
	}
	for name := range s.ConsumerNames(ctx).Name() {
		c, err := s.Consumer(ctx, name)
		if err != nil {
			t.Logf("consumer %s: %v", name, err)
			continue
		}
		i := c.CachedInfo()
		t.Logf("consumer %s: leader %s, pending %d, ack pending %d, redelivered %d, waiting pulls %d, delivered %d, ack floor %d",
			name, i.Cluster.Leader, i.NumPending, i.NumAckPending, i.NumRedelivered, i.NumWaiting, i.Delivered.Stream, i.AckFloor.Stream)
	}
	last, err := events.New(js).LastSeq(ctx)
	if err != nil {
		t.Logf("last seq: %v", err)
		return
	}
	evs, err := events.New(js).Read(ctx, events.Filter{}.Subject(), events.Cursor{Seq: max(1, last-14)}, 0)
	if err != nil {
		t.Logf("read: %v", err)
	}
	for _, ev := range evs {
		t.Logf("seq %d %s %s -> %s", ev.Seq, ev.Time.Format("15:04:05.000"), ev.Subject, ev.Env.ID)
	}
}
