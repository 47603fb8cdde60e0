package eventbench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// AppendConfig sizes the append benchmark.
type AppendConfig struct {
	// DataDir is a scratch directory; each sync mode gets its own store below it.
	DataDir string
	// Events per measured run (default 20000).
	Events int
	// Batch is the AppendBatch size (default 500).
	Batch int
	// SyncModes to measure (default both).
	SyncModes []string
	// Rounds of the async comparison, where each side keeps its best, and
	// (twice as many plus one, of half the events) of the paired auth
	// comparison (default 3).
	Rounds int
	// InFlight is how many batches are appended concurrently (default 4).
	InFlight int
	// PerMessageEvents is how many events the per-message durable baseline
	// publishes; each costs an fsync (default 2000).
	PerMessageEvents int
}

func (c *AppendConfig) ensureDefaults() {
	if c.Events == 0 {
		c.Events = 20000
	}
	if c.Batch == 0 {
		c.Batch = 500
	}
	if len(c.SyncModes) == 0 {
		c.SyncModes = []string{broker.SyncAlways, broker.SyncInterval}
	}
	if c.Rounds == 0 {
		c.Rounds = 3
	}
	if c.InFlight == 0 {
		c.InFlight = 4
	}
	if c.PerMessageEvents == 0 {
		c.PerMessageEvents = 2000
	}
}

// Targets of the append benchmark.
const (
	TargetAppendVsRawAsync       = 0.6
	TargetBatchedVsPerMsgDurable = 8
)

// rawStream is the baseline's stream: the same configuration as SYLK on its own
// subjects.
func rawStream() jetstream.StreamConfig {
	cfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	cfg.Name, cfg.Subjects, cfg.Description = "BENCH_RAW", []string{"bench.raw.>"}, "raw JetStream baseline"
	return cfg
}

// Envelopes returns n task dispatches of about 1 KB each.
func Envelopes(n int) ([]*schemas.Envelope, error) {
	out := make([]*schemas.Envelope, n)
	note := strings.Repeat("x", 760)
	for i := range out {
		env, err := schemas.New(schemas.TypeTaskDispatch, fmt.Sprintf("S%d", i%50), "orchestrator", "engineer", time.Now(), schemas.TaskDispatch{
			DAGID: "dag-bench", NodeID: fmt.Sprintf("n%d", i), Attempt: 1, Agent: "engineer", Tool: "exec",
			Args: map[string]any{"argv": []any{"go", "test", "./..."}, "note": note},
		})
		if err != nil {
			return nil, err
		}
		out[i] = env
	}
	return out, nil
}

// Append compares Sylk's batched append with raw JetStream async publish of the
// same bytes, in each sync mode, (in always mode) batched durable append with
// per-message durable publish, and appending with authentication on with it off.
func Append(ctx context.Context, cfg AppendConfig, progress func(string)) ([]Comparison, error) {
	cfg.ensureDefaults()
	var out []Comparison
	for _, mode := range cfg.SyncModes {
		cs, err := appendMode(ctx, cfg, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		auth, err := AuthCost(ctx, cfg, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		out = append(append(out, cs...), auth)
	}
	return out, nil
}

func appendMode(ctx context.Context, cfg AppendConfig, mode string, progress func(string)) ([]Comparison, error) {
	b, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/append-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench"})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	js := b.JetStream()
	if _, err := js.CreateOrUpdateStream(ctx, rawStream()); err != nil {
		return nil, err
	}
	log := events.New(js)
	report := func(s string) {
		if progress != nil {
			progress(fmt.Sprintf("sync %s: %s", mode, s))
		}
	}

	// Rounds alternate the two sides and keep each side's best, so a noisy
	// moment on the machine does not decide the ratio. The raw side publishes
	// exactly the bytes Sylk writes; each Sylk round has fresh ids, since the
	// stream drops repeated ones.
	var raw, async Measure
	for round := range cfg.Rounds {
		envs, err := Envelopes(cfg.Events)
		if err != nil {
			return nil, err
		}
		bodies := make([][]byte, len(envs))
		for i, e := range envs {
			if bodies[i], err = schemas.Marshal(e); err != nil {
				return nil, err
			}
		}
		report(fmt.Sprintf("round %d/%d: raw async publish of %d events", round+1, cfg.Rounds, cfg.Events))
		r, err := Time("jetstream PublishAsync", cfg.Events, func() error { return rawAsync(ctx, js, bodies) })
		if err != nil {
			return nil, err
		}
		report(fmt.Sprintf("round %d/%d: sylk AppendAsync of %d events", round+1, cfg.Rounds, cfg.Events))
		s, err := Time("sylk AppendAsync", cfg.Events, func() error {
			for _, env := range envs {
				if _, err := log.AppendAsync(env); err != nil {
					return err
				}
			}
			return log.Flush(ctx)
		})
		if err != nil {
			return nil, err
		}
		raw, async = Faster(raw, r), Faster(async, s)
	}
	envs, err := Envelopes(cfg.Events)
	if err != nil {
		return nil, err
	}
	bodies := make([][]byte, len(envs))
	for i, e := range envs {
		if bodies[i], err = schemas.Marshal(e); err != nil {
			return nil, err
		}
	}
	report(fmt.Sprintf("sylk atomic AppendBatch of %d events, batches of %d", cfg.Events, cfg.Batch))
	batched, err := Time(fmt.Sprintf("sylk AppendBatch(%d) x%d in flight", cfg.Batch, cfg.InFlight), cfg.Events, func() error {
		return appendBatches(ctx, log, envs, cfg.Batch, cfg.InFlight)
	})
	if err != nil {
		return nil, err
	}
	out := []Comparison{
		Compare(fmt.Sprintf("append async vs raw async (sync %s)", mode), async, raw, TargetAppendVsRawAsync),
		Compare(fmt.Sprintf("atomic batches vs raw async (sync %s)", mode), batched, raw, 0),
	}
	if mode == broker.SyncAlways {
		n := min(cfg.PerMessageEvents, len(bodies))
		report(fmt.Sprintf("raw per-message durable publish of %d events", n))
		perMsg, err := Time("jetstream Publish (one fsync each)", n, func() error {
			for i := range n {
				if _, err := js.Publish(ctx, fmt.Sprintf("bench.raw.sync.%d", i%50), bodies[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, Compare("durable: atomic batches vs per-message publish", batched, perMsg, TargetBatchedVsPerMsgDurable))
	}
	return out, nil
}

// appendBatches appends envs in batches of size, with up to inFlight batches
// awaiting their commit at once.
func appendBatches(ctx context.Context, log *events.Log, envs []*schemas.Envelope, size, inFlight int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(inFlight)
	for i := 0; i < len(envs); i += size {
		batch := envs[i:min(i+size, len(envs))]
		g.Go(func() error {
			_, err := log.AppendBatch(gctx, batch)
			return err
		})
	}
	return g.Wait()
}

// rawAsync publishes bodies with JetStream async publish, at most 4096 in
// flight, and waits for every ack.
func rawAsync(ctx context.Context, js jetstream.JetStream, bodies [][]byte) error {
	for i, body := range bodies {
		// Wait as long as it takes for room: in always mode every message is an
		// fsync, and the window fills.
		if _, err := js.PublishAsync(fmt.Sprintf("bench.raw.S%d.orchestrator.engineer.task_dispatch", i%50), body, jetstream.WithStallWait(time.Minute)); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
