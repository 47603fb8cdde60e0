package eventbench

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
)

// TargetAuthCost: appending with authentication on and an agent's
// credential (its permissions checked on every publish) at least this fast
// as with authentication off.
const TargetAuthCost = 0.9

// AuthCost compares AppendAsync through an agent:orchestrator credential on
// a server with authentication on against the same on a server without, in
// sync mode mode. A permission check costs microseconds beside a write's (an
// fsync's milliseconds in sync always), so a single timing of each side is
// decided by the machine's noise: the two are paired in 2*cfg.Rounds+1
// rounds of half cfg.Events each, the side that goes first alternating, and
// compared by the median of the rounds' ratios (see Paired).
func AuthCost(ctx context.Context, cfg AppendConfig, mode string, progress func(string)) (Comparison, error) {
	cfg.ensureDefaults()
	on, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/auth-on-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench"})
	if err != nil {
		return Comparison{}, err
	}
	defer on.Close()
	u, err := on.Auth().AddUser("bench-orchestrator", broker.Role{Kind: broker.RoleAgent, Name: "orchestrator"})
	if err != nil {
		return Comparison{}, err
	}
	nc, err := on.ConnAs("bench-orchestrator", u.Creds)
	if err != nil {
		return Comparison{}, err
	}
	defer nc.Close()
	off, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/auth-off-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench", NoAuth: true})
	if err != nil {
		return Comparison{}, err
	}
	defer off.Close()
	ncOff, err := off.NewConn("bench")
	if err != nil {
		return Comparison{}, err
	}
	defer ncOff.Close()

	rounds, n := 2*cfg.Rounds+1, max(cfg.Events/2, 1)
	side := func(name string, nc *nats.Conn) func(int) (Measure, error) {
		return func(round int) (Measure, error) {
			envs, err := Envelopes(n)
			if err != nil {
				return Measure{}, err
			}
			if progress != nil {
				progress(fmt.Sprintf("sync %s: round %d/%d: AppendAsync of %d events, %s", mode, round+1, rounds, n, name))
			}
			js, err := broker.NewJetStream(nc)
			if err != nil {
				return Measure{}, err
			}
			log := events.New(js)
			m, err := Time("sylk AppendAsync, "+name, n, func() error {
				for _, env := range envs {
					if _, err := log.AppendAsync(env); err != nil {
						return err
					}
				}
				return log.Flush(ctx)
			})
			if err != nil {
				return Measure{}, fmt.Errorf("%s: %w", name, err)
			}
			return m, nil
		}
	}
	return Paired(fmt.Sprintf("append with auth on (agent credential) vs auth off (sync %s)", mode), rounds, TargetAuthCost,
		side("auth on, agent credential", nc), side("auth off", ncOff))
}
