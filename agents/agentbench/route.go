// Package agentbench measures the agent runtime against bare JetStream in the
// same run: the routed message path, and DAG execution overhead.
package agentbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/schemas"
)

// RouteConfig sizes the routed-path benchmark.
type RouteConfig struct {
	DataDir string
	// Messages per measured run (default 5000).
	Messages int
	// SyncModes to measure (default interval, then always).
	SyncModes []string
	// Concurrency of the Guide and of the answering agent (default 64).
	Concurrency int
	// LatencyRate is the steady rate, messages per second, at which both sides'
	// latencies are sampled (default 1000): a latency under a load the system
	// sustains, not the length of a queue.
	LatencyRate int
	// LatencyMessages is how many are sampled (default 2000).
	LatencyMessages int
}

func (c *RouteConfig) ensureDefaults() {
	if c.Messages == 0 {
		c.Messages = 5000
	}
	if len(c.SyncModes) == 0 {
		c.SyncModes = []string{broker.SyncInterval, broker.SyncAlways}
	}
	if c.Concurrency == 0 {
		c.Concurrency = 64
	}
	if c.LatencyRate == 0 {
		c.LatencyRate = 1000
	}
	if c.LatencyMessages == 0 {
		c.LatencyMessages = 2000
	}
}

// Targets of the routed-path benchmark.
const (
	TargetRouteThroughput = 0.25
	// TargetLatencyFactor: Sylk's p50 and p99 at most this many times the raw
	// publish-to-delivery ones, i.e. a ratio (raw/Sylk) of at least 1/3.
	TargetLatencyFactor = 3
)

// Route measures append -> Guide -> agent handler -> reply appended, sustained,
// against raw JetStream async publish (throughput) and raw publish-to-delivery
// (latency), in each sync mode.
func Route(ctx context.Context, cfg RouteConfig, progress func(string)) ([]eventbench.Comparison, error) {
	cfg.ensureDefaults()
	var out []eventbench.Comparison
	for _, mode := range cfg.SyncModes {
		cs, err := routeMode(ctx, cfg, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}

func routeMode(ctx context.Context, cfg RouteConfig, mode string, progress func(string)) ([]eventbench.Comparison, error) {
	report := func(s string) {
		if progress != nil {
			progress(fmt.Sprintf("sync %s: %s", mode, s))
		}
	}
	b, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/route-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench"})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	js := b.JetStream()

	report(fmt.Sprintf("raw: %d async publishes, then publish-to-delivery latency", cfg.Messages))
	rawPub, rawLat, err := rawBaseline(ctx, b, cfg)
	if err != nil {
		return nil, err
	}

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	g := &guide.Guide{}
	for _, r := range []struct {
		agent string
		h     agents.Handler
	}{{guide.Name, g}, {"librarian", agents.HandlerFunc(answer)}} {
		runner, err := agents.NewRunner(js, r.h, agents.Options{Agent: r.agent, Concurrency: cfg.Concurrency, PerSession: cfg.Concurrency, MaxAckPending: 4 * cfg.Concurrency})
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); runner.Run(rctx) }()
	}

	report(fmt.Sprintf("raw: %d messages through two consume -> publish -> ack hops", cfg.Messages))
	rawHop, err := rawHops(ctx, b, cfg.Messages, cfg.Concurrency)
	if err != nil {
		return nil, err
	}

	report(fmt.Sprintf("sylk: %d context requests routed by the Guide and answered, as fast as they go", cfg.Messages))
	sylk, _, err := routed(ctx, b, cfg.Messages, nil)
	if err != nil {
		return nil, err
	}
	report(fmt.Sprintf("sylk: latency of %d more at %d/s", cfg.LatencyMessages, cfg.LatencyRate))
	_, lat, err := routed(ctx, b, cfg.LatencyMessages, newPacer(cfg.LatencyRate))
	if err != nil {
		return nil, err
	}
	return []eventbench.Comparison{
		eventbench.Compare(fmt.Sprintf("routed path vs raw async publish (sync %s)", mode), sylk, rawPub, TargetRouteThroughput),
		eventbench.Compare(fmt.Sprintf("routed path vs raw two-hop chain (sync %s)", mode), sylk, rawHop, 0),
		latencyComparison(fmt.Sprintf("routed p50 latency vs raw delivery (sync %s)", mode), lat, rawLat, 0.50),
		latencyComparison(fmt.Sprintf("routed p99 latency vs raw delivery (sync %s)", mode), lat, rawLat, 0.99),
	}, nil
}

// answer is the benchmark's Librarian: it replies at once.
func answer(_ context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	out, err := d.Derive(schemas.TypeContextResponse, "bench", "answer", schemas.ContextResponse{Answer: "ok"})
	return []*schemas.Envelope{out}, err
}

// latencyComparison turns two latency samples into a comparison at quantile q:
// speed is 1/latency, so ratio = raw latency / Sylk latency.
func latencyComparison(name string, sylk, raw []time.Duration, q float64) eventbench.Comparison {
	s, r := quantile(sylk, q), quantile(raw, q)
	m := func(n string, d time.Duration, count int) eventbench.Measure {
		return eventbench.Measure{Name: fmt.Sprintf("%s p%.0f %s", n, q*100, d), Ops: count, Seconds: d.Seconds(), PerSec: 1 / d.Seconds()}
	}
	return eventbench.Compare(name, m("sylk", s, len(sylk)), m("raw", r, len(raw)), 1.0/TargetLatencyFactor)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// rawBaseline: async publish throughput to a stream like SYLK, then per-message
// publish-to-delivery latency through a pull consumer.
func rawBaseline(ctx context.Context, b *broker.Broker, cfg RouteConfig) (eventbench.Measure, []time.Duration, error) {
	n := cfg.Messages
	js := b.JetStream()
	scfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	scfg.Name, scfg.Subjects = "BENCH_RAW", []string{"bench.raw.>"}
	stream, err := js.CreateOrUpdateStream(ctx, scfg)
	if err != nil {
		return eventbench.Measure{}, nil, err
	}
	body := make([]byte, 600)
	pub, err := eventbench.Time("jetstream PublishAsync", n, func() error {
		for range n {
			if _, err := js.PublishAsync("bench.raw.pub", body, jetstream.WithStallWait(time.Minute)); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return pub, nil, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", FilterSubject: "bench.raw.lat", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return pub, nil, err
	}
	n = cfg.LatencyMessages
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	lats := make([]time.Duration, 0, n)
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		lats = append(lats, time.Since(sent[m.Headers().Get("k")]))
		if len(lats) == n {
			close(done)
		}
	})
	if err != nil {
		return pub, nil, err
	}
	defer cc.Stop()
	pace := newPacer(cfg.LatencyRate)
	for i := range n {
		pace.wait(i)
		m := nats.NewMsg("bench.raw.lat")
		m.Data = body
		k := fmt.Sprint(i)
		m.Header.Set("k", k)
		mu.Lock()
		sent[k] = time.Now()
		mu.Unlock()
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			return pub, nil, err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return pub, nil, ctx.Err()
	}
	return pub, lats, nil
}

// pacer spaces messages at a steady rate.
type pacer struct {
	start time.Time
	every time.Duration
}

func newPacer(perSec int) *pacer {
	return &pacer{start: time.Now(), every: time.Second / time.Duration(perSec)}
}

// wait returns when message i is due.
func (p *pacer) wait(i int) {
	if p == nil {
		return
	}
	time.Sleep(time.Until(p.start.Add(time.Duration(i) * p.every)))
}

// rawHops is what the routed path does, in bare JetStream: n messages
// published async, then two durable consumers each consuming, publishing the
// message on to the next subject and acking it (workers at a time), until all
// n reach the end. It is the ceiling of any design that stores every hop.
func rawHops(ctx context.Context, b *broker.Broker, n, workers int) (eventbench.Measure, error) {
	js := b.JetStream()
	scfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	scfg.Name, scfg.Subjects = "BENCH_HOPS", []string{"bench.hop.>"}
	stream, err := js.CreateOrUpdateStream(ctx, scfg)
	if err != nil {
		return eventbench.Measure{}, err
	}
	arrived := make(chan struct{}, n)
	sub, err := b.Conn().Subscribe("bench.hop.2", func(*nats.Msg) { arrived <- struct{}{} })
	if err != nil {
		return eventbench.Measure{}, err
	}
	defer sub.Unsubscribe()
	for hop := range 2 {
		cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("hop%d", hop),
			FilterSubject: fmt.Sprintf("bench.hop.%d", hop), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4 * workers})
		if err != nil {
			return eventbench.Measure{}, err
		}
		sem := make(chan struct{}, workers)
		next := fmt.Sprintf("bench.hop.%d", hop+1)
		cc, err := cons.Consume(func(m jetstream.Msg) {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				if _, err := js.Publish(ctx, next, m.Data()); err == nil {
					m.Ack()
				}
			}()
		}, jetstream.PullMaxMessages(2*workers))
		if err != nil {
			return eventbench.Measure{}, err
		}
		defer cc.Stop()
	}
	body := make([]byte, 600)
	return eventbench.Time("jetstream: publish, then 2 x (consume, publish, ack)", n, func() error {
		for range n {
			if _, err := js.PublishAsync("bench.hop.0", body, jetstream.WithStallWait(time.Minute)); err != nil {
				return err
			}
		}
		for range n {
			select {
			case <-arrived:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// routed appends n unaddressed context requests and waits for every answer;
// each latency is from before the append to the answer's arrival.
func routed(ctx context.Context, b *broker.Broker, n int, pace *pacer) (eventbench.Measure, []time.Duration, error) {
	log := events.New(b.JetStream())
	var mu sync.Mutex
	sent := make(map[string]time.Time, n)
	lats := make([]time.Duration, 0, n)
	done := make(chan struct{})
	sub, err := b.Conn().Subscribe(events.Filter{Target: "bench", Type: schemas.TypeContextResponse}.Subject(), func(m *nats.Msg) {
		corr := m.Header.Get(events.HeaderCorrelation)
		mu.Lock()
		defer mu.Unlock()
		t, ok := sent[corr]
		if !ok {
			return
		}
		delete(sent, corr)
		lats = append(lats, time.Since(t))
		if len(lats) == n {
			close(done)
		}
	})
	if err != nil {
		return eventbench.Measure{}, nil, err
	}
	defer sub.Unsubscribe()
	envs := make([]*schemas.Envelope, n)
	for i := range envs {
		if envs[i], err = schemas.New(schemas.TypeContextRequest, fmt.Sprintf("S%d", i%32), "user", "", time.Now(), schemas.ContextRequest{Query: "where is the config loader?"}); err != nil {
			return eventbench.Measure{}, nil, err
		}
	}
	m, err := eventbench.Time("append -> guide -> librarian -> reply", n, func() error {
		if pace != nil {
			pace.start = time.Now()
		}
		for i, env := range envs {
			pace.wait(i)
			env.Timestamp = time.Now().UTC()
			mu.Lock()
			sent[env.CorrelationID] = time.Now()
			mu.Unlock()
			if _, err := log.AppendAsync(env); err != nil {
				return err
			}
		}
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return m, lats, err
}
