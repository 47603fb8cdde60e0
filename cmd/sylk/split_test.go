package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/audit"
	"github.com/sylk/sylk/schemas"
)

// TestSplitClusterMinorityRefusesAppends splits a cluster of three `sylk
// serve` processes on loopback: every route between them goes through a
// proxy (each member advertises its proxy as --cluster-advertise), which
// cuts the member holding the stream leader off from the other two while
// all three go on running. The cut-off member's appends fail with the
// clear no-leader error (from the CLI too), while the majority elects a
// leader and goes on storing. Once the split heals, the stream holds every
// event the majority took, once, and none of those the minority refused,
// and the minority member's projections equal a rebuild from the stream.
func TestSplitClusterMinorityRefusesAppends(t *testing.T) {
	t.Parallel() // a long end-to-end run of its own processes, ports and directories
	bin := sylkBinary(t)
	dirs := brokertest.ClusterDataDirs(t, 3, func(d string) error { _, err := audit.LoadKey(d); return err })
	work := filepath.Join(filepath.Dir(dirs[0]), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	addrs := brokertest.FreeAddrs(t, 9)
	routes, fronts, listen := addrs[:3], addrs[3:6], addrs[6:]
	px := startRouteProxy(t, fronts, routes)
	names := make([]string, 3)
	for i, r := range routes {
		names[i] = "sylk-" + strings.ReplaceAll(r, ":", "-")
	}
	args := func(i int) []string {
		return []string{"--listen", listen[i], "--sync", "always", "--cluster-name", "t", "--cluster-listen", routes[i],
			"--cluster-advertise", fronts[i], "--routes", othersOf(fronts, i), "--replicas", "3", "--roles", "broker,projections"}
	}
	procs := launchMembers(t, bin, dirs, work, args)
	creds := filepath.Join(dirs[0], "auth", "users", "admin.creds")
	urls := func(members ...int) string {
		var us []string
		for _, i := range members {
			us = append(us, "nats://"+listen[i])
		}
		return strings.Join(us, ",")
	}
	client := connectCluster(t, broker.Options{NATSURL: urls(0, 1, 2), CredsFile: creds})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	appendSignals := func(log *events.Log, n int) []string {
		t.Helper()
		var ids []string
		for range n {
			env, _ := schemas.New(schemas.TypeSignal, "split", "user", "engineer", time.Now(), schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeSession})
			if _, err := log.Append(ctx, env); err != nil {
				t.Fatalf("append with a quorum: %v", err)
			}
			ids = append(ids, env.ID)
		}
		return ids
	}
	stored := appendSignals(events.New(client.JetStream()), 5)

	reps, err := broker.Replicas(ctx, client.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	alone := slices.Index(names, reps[0].Leader)
	if alone < 0 {
		t.Fatalf("stream leader %q is none of the members %v", reps[0].Leader, names)
	}
	var rest []int
	for i := range 3 {
		if i != alone {
			rest = append(rest, i)
		}
	}
	// Clients of each side, connected before the split: a client learns of
	// the other members from its server and would fail over to them.
	minority := connectCluster(t, broker.Options{NATSURL: urls(alone), CredsFile: creds})
	majority := connectCluster(t, broker.Options{NATSURL: urls(rest...), CredsFile: creds})
	px.cut(names[alone])
	t.Logf("cut off member %d (%s, the stream leader)", alone, names[alone])

	// The minority refuses, saying why, from the CLI and from a client.
	var refused []string
	var wg sync.WaitGroup
	var cliOut []byte
	var cliErr error
	wg.Go(func() {
		c := exec.CommandContext(ctx, bin, "--data", filepath.Join(work, "cli"), "--nats-url", urls(alone), "--creds", creds, "signal", "pause", "--session", "split")
		c.Dir = work
		cliOut, cliErr = c.CombinedOutput()
	})
	for range 2 {
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		env, _ := schemas.New(schemas.TypeSignal, "split", "user", "engineer", time.Now(), schemas.Signal{Action: schemas.SignalResume, Scope: schemas.ScopeSession})
		_, err := events.New(minority.JetStream()).Append(actx, env)
		acancel()
		if !errors.Is(err, events.ErrNoLeader) {
			t.Fatalf("append on the cut-off member: %v, want ErrNoLeader", err)
		}
		refused = append(refused, env.ID)
	}
	// The majority elects a leader and goes on.
	stored = append(stored, appendSignals(events.New(majority.JetStream()), 5)...)
	wg.Wait()
	if cliErr == nil || !strings.Contains(string(cliOut), "this side of a split cluster is the minority") {
		t.Fatalf("sylk signal on the cut-off member: %v, output:\n%s", cliErr, cliOut)
	}

	px.heal(names[alone])
	waitCopiesCurrent(ctx, t, client, len(procs), 2*time.Minute)
	log := events.New(client.JetStream())
	// Right after the heal the JetStream layer may still answer 503 while
	// its members settle: read again until a deadline.
	var evs []*events.Event
	for deadline := time.Now().Add(30 * time.Second); ; {
		if evs, err = log.Read(ctx, events.Filter{Session: "split"}.Subject(), events.Cursor{}, 0); err == nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Env.ID)
	}
	for _, id := range refused {
		if slices.Contains(got, id) {
			t.Errorf("refused append %s is in the stream", id)
		}
	}
	if !slices.Equal(got, stored) {
		t.Fatalf("the stream holds %v, want the appends that succeeded, once each: %v", got, stored)
	}
	// The minority member folded nothing the stream does not hold.
	procs[alone].stop(t)
	verifyStore(t, dirs[alone], log)
}

// routeProxy forwards a cluster's routes to its members and can cut a member
// off from the others while it runs. Each member listens for routes behind
// one front (its --cluster-advertise), so every route, those the members
// learn of from each other included, goes through the proxy. A route's
// first line from the member that opened it (CONNECT) carries its server id,
// and the first from the member behind the front (INFO) carries that
// member's id and name: cut closes and refuses every route to or from the
// named member.
type routeProxy struct {
	mu    sync.Mutex
	ids   map[string]string // server id -> member name
	cutOf map[string]bool   // member names cut off
	conns map[*proxied]bool
}

// proxied is one route through the proxy: to the member named to, opened
// by the member whose server id is from ("" until its CONNECT).
type proxied struct {
	from, to string
	a, b     net.Conn
}

func (p *proxied) close() { p.a.Close(); p.b.Close() }

func startRouteProxy(t *testing.T, fronts, targets []string) *routeProxy {
	t.Helper()
	px := &routeProxy{ids: map[string]string{}, cutOf: map[string]bool{}, conns: map[*proxied]bool{}}
	for i, f := range fronts {
		ln, err := net.Listen("tcp", f)
		if err != nil {
			t.Fatal(err)
		}
		to := "sylk-" + strings.ReplaceAll(targets[i], ":", "-")
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { px.forward(c, targets[i], to) })
			}
		})
		t.Cleanup(func() {
			ln.Close()
			px.mu.Lock()
			for c := range px.conns {
				c.close()
			}
			px.mu.Unlock()
			wg.Wait()
		})
	}
	return px
}

// forward carries one route from c to the member at target (named to).
func (px *routeProxy) forward(c net.Conn, target, to string) {
	s, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p := &proxied{to: to, a: c, b: s}
	if !px.add(p) {
		p.close()
		return
	}
	defer px.remove(p)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The member's INFO names it.
		r := bufio.NewReader(s)
		if line, err := r.ReadBytes('\n'); err == nil {
			var info struct {
				ID   string `json:"server_id"`
				Name string `json:"server_name"`
			}
			if json.Unmarshal(routeArg(line, "INFO "), &info) == nil {
				px.learn(info.ID, info.Name)
			}
			c.Write(line)
		}
		io.Copy(c, r)
		p.close()
	}()
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err != nil {
		p.close()
		<-done
		return
	}
	var conn struct {
		ID string `json:"name"`
	}
	json.Unmarshal(routeArg(line, "CONNECT "), &conn)
	if !px.from(p, conn.ID) {
		p.close()
		<-done
		return
	}
	if _, err := s.Write(line); err == nil {
		io.Copy(s, r)
	}
	p.close()
	<-done
}

// routeArg is the JSON argument of a protocol line starting with op.
func routeArg(line []byte, op string) []byte {
	s := strings.TrimSpace(string(line))
	if !strings.HasPrefix(s, op) {
		return nil
	}
	return []byte(strings.TrimPrefix(s, op))
}

func (px *routeProxy) add(p *proxied) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.cutOf[p.to] {
		return false
	}
	px.conns[p] = true
	return true
}

func (px *routeProxy) remove(p *proxied) {
	px.mu.Lock()
	defer px.mu.Unlock()
	delete(px.conns, p)
}

func (px *routeProxy) learn(id, name string) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.ids[id] = name
}

// from records who opened p; false if that member is cut off.
func (px *routeProxy) from(p *proxied, id string) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	p.from = id
	return !px.cutOf[px.ids[id]]
}

// cut closes every route to or from member and refuses new ones until heal.
func (px *routeProxy) cut(member string) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.cutOf[member] = true
	for p := range px.conns {
		if p.to == member || px.ids[p.from] == member {
			p.close()
		}
	}
}

func (px *routeProxy) heal(member string) {
	px.mu.Lock()
	defer px.mu.Unlock()
	delete(px.cutOf, member)
}
