package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/audit"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
)

// TestClusterSurvivesLeaderKill runs three `sylk serve` processes as a
// cluster on loopback, with streams of three copies and the agents spread
// over them, runs a 40-node chain, SIGKILLs the process holding the stream
// leader mid-run and restarts it later. The DAG completes, each node's tool
// ran once (plus at most one repeat for the kill), the stream holds no
// envelope id twice, the DLQ is empty and every process's projections
// equal a rebuild.
func TestClusterSurvivesLeaderKill(t *testing.T) {
	const nodes, kills = 40, 1
	bin := sylkBinary(t)
	dirs := brokertest.ClusterDataDirs(t, 3, func(d string) error { _, err := audit.LoadKey(d); return err })
	work := filepath.Join(filepath.Dir(dirs[0]), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeChainPlan(t, work, nodes, "0.05")

	addrs := brokertest.FreeAddrs(t, 6)
	routes, listen := addrs[:3], addrs[3:]
	// Every agent runs in two processes at least, engineers in all three.
	agentsOf := []string{
		"guide,architect,orchestrator,inspector,engineer",
		"orchestrator,archivalist,librarian,tester,engineer",
		"guide,architect,archivalist,librarian,inspector,tester,engineer",
	}
	args := func(i int) []string {
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		return []string{"--listen", listen[i], "--sync", "always", "--ack-wait", "2s", "--cluster-name", "t",
			"--cluster-listen", routes[i], "--routes", strings.Join(others, ","), "--replicas", "3", "--agents", agentsOf[i]}
	}
	procs := make([]*serveProc, 3)
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
			dumpLogs(t, dirs)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var urls []string
	for _, l := range listen {
		urls = append(urls, "nats://"+l)
	}
	client, err := broker.Connect(ctx, broker.Options{NATSURL: strings.Join(urls, ","), CredsFile: filepath.Join(dirs[0], "auth", "users", "admin.creds"), Name: "cluster-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	submitted := submitPlan(t, bin, dirs[0], work)

	// Mid-run, the process holding the stream leader dies; later it comes back.
	lines := filepath.Join(work, "lines.txt")
	brokertest.Eventually(t, time.Minute, "ten nodes started", func() bool { return len(readLines(t, lines)) >= 20 })
	reps, err := broker.Replicas(ctx, client.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	leader := slices.IndexFunc(routes, func(r string) bool { return reps[0].Leader == "sylk-"+strings.ReplaceAll(r, ":", "-") })
	if leader < 0 {
		t.Fatalf("stream leader %q is none of the members %v", reps[0].Leader, routes)
	}
	procs[leader].kill(t)
	at := len(readLines(t, lines))
	t.Logf("killed member %d (%s, the stream leader) at %d lines", leader, reps[0].Leader, at)
	brokertest.Eventually(t, time.Minute, "ten more nodes without it", func() bool { return len(readLines(t, lines)) >= at+20 })
	procs[leader] = launchServe(t, bin, dirs[leader], work, args(leader)...)
	procs[leader].waitReady(t, dirs[leader])

	checkChainRun(t, client.JetStream(), submitted.Session, work, nodes, kills)

	// No envelope id twice in the stream.
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

	// Each process's projections equal a rebuild: stopped one at a time (two
	// members keep the stream up), verified against the cluster, restarted.
	log := events.New(client.JetStream())
	for i := range procs {
		// Stop a member only once every copy is current: with a follower
		// still catching up (the restarted one), stopping another leaves
		// the streams without a quorum.
		brokertest.Eventually(t, time.Minute, "every copy of both streams current", func() bool {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			reps, err := broker.Replicas(rctx, client.JetStream())
			if err != nil {
				return false
			}
			for _, r := range reps {
				if r.Leader == "" || len(r.Current) != len(procs)-1 {
					return false
				}
			}
			return true
		})
		procs[i].stop(t)
		verifyStore(t, dirs[i], log)
		if i < len(procs)-1 {
			procs[i] = launchServe(t, bin, dirs[i], work, args(i)...)
			procs[i].waitReady(t, dirs[i])
		}
	}
}

// dumpLogs writes the last lines of each member's log (<data>.log) to the
// test's output, for a failure to be read after the temporary directory
// is gone.
func dumpLogs(t *testing.T, dirs []string) {
	const keep = 60
	for _, d := range dirs {
		b, err := os.ReadFile(d + ".log")
		if err != nil {
			t.Logf("%s.log: %v", d, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("the last %d lines of %s.log:\n%s", keep, filepath.Base(d), strings.Join(lines[max(0, len(lines)-keep):], "\n"))
	}
}
