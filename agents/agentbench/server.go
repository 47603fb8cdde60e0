package agentbench

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sylk/sylk/agents"

	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
)

// server is what the agent benchmarks run on: an embedded broker (sync
// interval) and a projections store in data, the projector following the
// stream and, with agents, every agent; and a work directory for their tools.
type server struct {
	b     *broker.Broker
	store *projections.Store
	log   *events.Log
	work  string
	// names are the agents run, if any.
	names []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startServer starts a server in data; run, the agents (nil: none), gets
// the broker, the store and the work directory filled in.
func startServer(ctx context.Context, data, work string, run *runtime.Config) (*server, error) {
	b, err := broker.Start(ctx, broker.Options{DataDir: data, Listen: broker.ListenNone, Sync: broker.SyncInterval, Name: "bench"})
	if err != nil {
		return nil, err
	}
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(data, "projections")})
	if err != nil {
		b.Close()
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		store.Close()
		b.Close()
		return nil, err
	}
	s := &server{b: b, store: store, log: events.New(b.JetStream()), work: work}
	rctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.wg.Add(1)
	go func() { defer s.wg.Done(); store.Projector(s.log).Run(rctx) }()
	if run != nil {
		cfg := *run
		cfg.JetStream, cfg.Store, cfg.DefaultWorkDir = b.JetStream(), store, work
		s.names = cfg.Names()
		s.wg.Add(1)
		go func() { defer s.wg.Done(); runtime.Run(rctx, cfg) }()
	}
	return s, nil
}

// agentsUp waits until every agent's consumer exists: the agents take what
// is appended from then on.
func (s *server) agentsUp(ctx context.Context) error {
	return agents.AwaitConsumers(ctx, s.b.JetStream(), s.names, time.Millisecond, nil)
}

// stopAgents stops the projector and the agents; the store and the broker
// stay open.
func (s *server) stopAgents() {
	s.cancel()
	s.wg.Wait()
}

func (s *server) close() {
	s.stopAgents()
	s.store.Close()
	s.b.Close()
}

// say reports a step, if anyone listens.
func say(progress func(string), s string) {
	if progress != nil {
		progress(s)
	}
}
