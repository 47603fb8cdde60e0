package agentbench

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events/eventbench"
)

// routeAuthCost compares the routed path on a server with authentication on,
// the Guide and the Librarian each on its own agent:<kind> credential (its
// permissions checked on every publish, fetch and ack), against the same on a
// server without authentication, alternating two rounds and keeping each
// side's best.
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
	stopOff, err := startAgents(ctx, cfg, mode, func(string) jetstream.JetStream { return off.JetStream() })
	if err != nil {
		return eventbench.Comparison{}, err
	}
	defer stopOff()

	var withAuth, without eventbench.Measure
	for round := range 2 {
		for _, side := range []struct {
			name string
			b    *broker.Broker
			best *eventbench.Measure
		}{{"auth on, agent credentials", on, &withAuth}, {"auth off", off, &without}} {
			if progress != nil {
				progress(fmt.Sprintf("sync %s: round %d/2: %d requests routed, %s", mode, round+1, cfg.Messages, side.name))
			}
			m, _, err := routed(ctx, side.b, cfg.Messages, nil)
			if err != nil {
				return eventbench.Comparison{}, errors.Join(fmt.Errorf("%s", side.name), err)
			}
			if m.PerSec > side.best.PerSec {
				*side.best = m
			}
		}
	}
	return eventbench.Compare(fmt.Sprintf("routed path with auth on (agent credentials) vs auth off (sync %s)", mode), withAuth, without, eventbench.TargetAuthCost), nil
}
