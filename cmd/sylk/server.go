package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/tools"
)

// server is a running broker with the projections store and the components
// `sylk serve` runs over them.
type server struct {
	broker *broker.Broker
	store  *projections.Store
	api    *api.Service
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
	opts.DeferInfo = true
	b, err := broker.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	store, err := projections.Open(ctx, projections.Options{Dir: ProjectionsDir(opts.DataDir), Logger: slog.Default()})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("projections: %w", err), b.Close())
	}
	// The query API answers before server.json says the server is up: a client
	// that finds the file finds the API.
	svc, err := api.Serve(ctx, b.Conn(), store, events.New(b.JetStream()), slog.Default())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("api: %w", err), store.Close(), b.Close())
	}
	cctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(cctx)
	s := &server{broker: b, store: store, api: svc, cancel: cancel, group: g, failed: gctx.Done()}
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
	if err := b.PublishInfo(); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// settleWithin bounds how long a command that ran the agents itself waits for
// them to finish what the command's work set off.
const settleWithin = 5 * time.Second

// settle waits until every agent has nothing pending or unacked (the
// Archivalist's entry for a workflow that just ended, a last notice), so that
// stopping an embedded server cuts nothing off. A cancelled ctx (Ctrl-C) skips
// it.
func (s *server) settle(ctx context.Context, within time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !s.idle(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *server) idle(ctx context.Context) bool {
	stream, err := s.broker.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		return false
	}
	lister := stream.ListConsumers(ctx)
	for c := range lister.Info() {
		if strings.HasPrefix(c.Name, "agent-") && (c.NumPending > 0 || c.NumAckPending > 0) {
			return false
		}
	}
	return lister.Err() == nil
}

// stop ends the components and the API, then closes the store and the broker.
func (s *server) stop() error {
	s.cancel()
	err := s.group.Wait()
	return errors.Join(err, s.api.Stop(), s.store.Close(), s.broker.Close())
}

// serverComponents lists what runs beside the broker: the projector folding
// the stream into the store, and the agents.
func serverComponents(f *Factory) []serverComponent {
	return []serverComponent{
		{"projector", func(ctx context.Context, s *server) error {
			return s.store.Projector(events.New(s.broker.JetStream())).Run(ctx)
		}},
		{"agents", func(ctx context.Context, s *server) error {
			cfg := f.RuntimeConfig()
			cfg.JetStream, cfg.Store = s.broker.JetStream(), s.store
			client, closeLLM, err := startLLM(ctx, f, s, cfg.Tools.Secrets)
			if err != nil {
				return err
			}
			cfg.LLM = client
			err = runtime.Run(ctx, cfg)
			return errors.Join(err, closeLLM())
		}},
	}
}

// startLLM makes the LLM client the agents share, when an LLM is configured:
// calls recorded in the store, budgets counted by a ledger that folds every
// llm_usage event of the stream and follows new ones (so they hold across
// processes and restarts), tokens streamed live on core NATS, secrets
// redacted before anything is sent or recorded. A rate-limit pause left
// behind by a process that stopped is ended first. stop must be called
// after the agents stop: it ends a pause this client started and stops the
// ledger.
func startLLM(ctx context.Context, f *Factory, s *server, secrets tools.SecretOptions) (client *llm.Client, stop func() error, err error) {
	cfg, err := f.LLMConfig()
	if errors.Is(err, llm.ErrNotConfigured) {
		return nil, func() error { return nil }, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if len(cfg.APIKey) >= 4 {
		secrets.Values = append(slices.Clone(secrets.Values), cfg.APIKey)
	}
	red, err := tools.NewRedactor(secrets)
	if err != nil {
		return nil, nil, err
	}
	log := events.New(s.broker.JetStream())
	ledger := llm.NewLedger()
	stopLedger, err := ledger.Follow(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	client, err = llm.NewClient(cfg, llm.Deps{Records: s.store, Usage: ledger, Live: s.broker.Conn(), Redactor: red, Logger: slog.Default()})
	if err != nil {
		stopLedger()
		return nil, nil, err
	}
	if err := client.ResumeStalePause(ctx, log); err != nil {
		slog.Warn("llm: a rate-limit pause left by a stopped process was not ended", "err", err)
	}
	slog.Info("llm", "endpoint", cfg.String(), "budget_global", cfg.Budgets.Global, "budget_session", cfg.Budgets.Session, "budget_task", cfg.Budgets.Task)
	return client, func() error {
		err := client.Close()
		stopLedger()
		return err
	}, nil
}

// RuntimeConfig is the agent runtime's configuration: tools run in the
// submitting directory, with the configured permissions over the defaults.
// The LLM client is made by the agents component (startLLM), which lives as
// long as the agents.
func (f *Factory) RuntimeConfig() runtime.Config {
	wd, _ := os.Getwd()
	policy := tools.DefaultPolicy()
	for agent, allowed := range f.Cfg.Permissions {
		policy.Agents[agent] = tools.AgentPolicy{Tools: allowed}
	}
	ackWait, _ := time.ParseDuration(f.Cfg.AckWait) // checked in configure
	cfg := runtime.Config{
		Tools:          tools.Options{Permissions: policy},
		DefaultWorkDir: wd,
		AckWait:        ackWait,
		Logger:         slog.Default(),
		LLMHint:        llm.Hint,
	}
	if f.Cfg.LLM.Configured() {
		// Plans with prompt nodes validate before the client exists.
		cfg.PromptAgents = runtime.ToolAgents()
	}
	return cfg
}
