package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/tools"
)

// server is a running broker with the projections store and the components
// `sylk serve` runs over them.
type server struct {
	broker *broker.Broker
	store  *projections.Store
	cancel context.CancelFunc
	group  *errgroup.Group
	// failed is closed when a component returns an error.
	failed <-chan struct{}
}

// serverComponent runs beside the broker until ctx ends.
type serverComponent struct {
	name string
	run  func(ctx context.Context, s *server) error
}

// ProjectionsDir is where the Pebble projections live in a data directory.
func ProjectionsDir(dataDir string) string { return filepath.Join(dataDir, "projections") }

// startServer starts an embedded broker on the data directory, opens the
// projections store and runs the server's components over them.
func startServer(ctx context.Context, f *Factory, opts broker.Options) (*server, error) {
	b, err := broker.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	store, err := projections.Open(ctx, projections.Options{Dir: ProjectionsDir(opts.DataDir), Logger: slog.Default()})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("projections: %w", err), b.Close())
	}
	cctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(cctx)
	s := &server{broker: b, store: store, cancel: cancel, group: g, failed: gctx.Done()}
	for _, c := range serverComponents(f) {
		g.Go(func() error {
			err := c.run(gctx, s)
			if err != nil && !errors.Is(err, context.Canceled) {
				slog.Error("server component failed", "component", c.name, "err", err)
				return fmt.Errorf("%s: %w", c.name, err)
			}
			return nil
		})
	}
	return s, nil
}

// stop ends the components, then closes the store and the broker.
func (s *server) stop() error {
	s.cancel()
	err := s.group.Wait()
	return errors.Join(err, s.store.Close(), s.broker.Close())
}

// serverComponents lists what runs beside the broker: the projector folding
// the stream into the store, and the agents.
func serverComponents(f *Factory) []serverComponent {
	return []serverComponent{
		{"projector", func(ctx context.Context, s *server) error {
			return s.store.Projector(events.New(s.broker.JetStream())).Run(ctx)
		}},
		{"api", func(ctx context.Context, s *server) error {
			return serveAPI(ctx, s.broker, s.store)
		}},
		{"agents", func(ctx context.Context, s *server) error {
			cfg := f.RuntimeConfig()
			cfg.JetStream, cfg.Store = s.broker.JetStream(), s.store
			return runtime.Run(ctx, cfg)
		}},
	}
}

// RuntimeConfig is the agent runtime's configuration: tools run in the
// submitting directory, with the configured permissions over the defaults.
func (f *Factory) RuntimeConfig() runtime.Config {
	wd, _ := os.Getwd()
	policy := tools.DefaultPolicy()
	for agent, allowed := range f.Cfg.Permissions {
		policy.Agents[agent] = tools.AgentPolicy{Tools: allowed}
	}
	ackWait, _ := time.ParseDuration(f.Cfg.AckWait) // checked in configure
	return runtime.Config{
		Tools:          tools.Options{Permissions: policy},
		DefaultWorkDir: wd,
		AckWait:        ackWait,
		Logger:         slog.Default(),
	}
}
