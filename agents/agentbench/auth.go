package agentbench

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events/eventbench"
)

// authRounds is how many paired rounds the auth comparison takes: as many as
// `bench append`'s, an odd count so the median is a round's own ratio.
const authRounds = 7

// routeAuthCost compares the routed path on a server with authentication on,
// the Guide and the Librarian each on its own agent:<kind> credential (its
// permissions checked on every publish, fetch and ack), against the same on a
// server without authentication. A permission check costs microseconds beside
// a routed request's hops, so one timing of each side is decided by the
// machine's noise: as `bench append` does, the two are paired in authRounds
// rounds of cfg.Messages each, the side that goes first alternating, and
// compared by the median of the rounds' ratios (see eventbench.Paired).
// Rounds of half as many lasted under a second at sync interval, and a
// burst of the machine's load decided some of them alone (round ratios of
// 0.44 to 11).
func routeAuthCost(ctx context.Context, cfg RouteConfig, mode string, progress func(string)) (eventbench.Comparison, error) {
	on, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/route-auth-on-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench"})
	if err != nil {
		return eventbench.Comparison{}, err
	}
	defer on.Close()
	off, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/route-auth-off-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench", NoAuth: true})
	if err != nil {
		return eventbench.Comparison{}, err
	}
	defer off.Close()

	conns := map[string]jetstream.JetStream{}
	var ncs []*nats.Conn
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	for _, kind := range []string{"guide", "librarian"} {
		u, err := on.Auth().AddUser("bench-"+kind, broker.Role{Kind: broker.RoleAgent, Name: kind})
		if err != nil {
			return eventbench.Comparison{}, err
		}
		nc, err := on.ConnAs("bench-"+kind, u.Creds)
		if err != nil {
			return eventbench.Comparison{}, err
		}
		ncs = append(ncs, nc)
		if conns[kind], err = broker.NewJetStream(nc); err != nil {
			return eventbench.Comparison{}, err
		}
	}
	stopOn, err := startAgents(ctx, cfg, mode, func(kind string) jetstream.JetStream { return conns[kind] })
	if err != nil {
		return eventbench.Comparison{}, err
	}
	defer stopOn()
	stopOff, err := startAgentsOn(ctx, cfg, off)
	if err != nil {
		return eventbench.Comparison{}, err
	}
	defer stopOff()

	report := func(s string) { say(progress, fmt.Sprintf("sync %s: %s", mode, s)) }
	return eventbench.Paired(fmt.Sprintf("routed path with auth on (agent credentials) vs auth off (sync %s)", mode), authRounds, eventbench.TargetAuthCost,
		routedRounds(ctx, on, cfg.Messages, authRounds, "auth on, agent credentials", report),
		routedRounds(ctx, off, cfg.Messages, authRounds, "auth off", report))
}
