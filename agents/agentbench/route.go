// Package agentbench measures the agent runtime against bare JetStream in the
// same run: the routed message path, and DAG execution overhead.
package agentbench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// latencies are sampled: a latency under a load the system sustains, not
	// the length of a queue. Zero (the default) takes half the slowest
	// throughput the run measured, which every side sustains however busy
	// the machine is (a fixed 1000/s was above what raw async publish
	// sustained with --sync always at load 11-18, and every side's "latency"
	// was seconds of queue).
	LatencyRate int
	// LatencyMessages is how many are sampled (default 2000).
	LatencyMessages int
	// Settle, if set, runs in RoutedPath's measured time after the last
	// answer, given the stream's last sequence: what runs beside the path
	// (a projector) finishes its share of the run inside the measure.
	Settle func(ctx context.Context, last uint64) error
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
	if c.LatencyMessages == 0 {
		c.LatencyMessages = 2000
	}
}

// latencyRate is the rate latencies are sampled at: LatencyRate if set, else
// half the slowest of the throughputs ms (at least 1/s).
func (c *RouteConfig) latencyRate(ms ...eventbench.Measure) int {
	if c.LatencyRate > 0 {
		return c.LatencyRate
	}
	slowest := ms[0].PerSec
	for _, m := range ms[1:] {
		slowest = min(slowest, m.PerSec)
	}
	return max(1, int(slowest/2))
}

// Targets of the routed-path benchmark.
const (
	// TargetDurableThroughput is the routed path's least throughput with
	// --sync always over the bare two-hop chain's (see chain), same run: what
	// the runtime keeps of what JetStream itself does with the same three
	// stored messages, two deliveries and two acks, every event on disk
	// before its ack.
	TargetDurableThroughput = 0.6
	// TargetLatencyFactor: Sylk's p50 and p99 at most this many times the raw
	// publish-to-delivery ones, i.e. a ratio (raw/Sylk) of at least 1/3.
	TargetLatencyFactor = 3
)

// routeRounds is how many paired rounds the routed path and the bare chain
// take: each round measures both back to back, so a burst of the shared
// machine's load moves one round's ratio, not the comparison (the median).
const routeRounds = 3

// Route measures append -> Guide -> agent handler -> reply appended, sustained,
// against the same two hops in bare JetStream (the bare chain, in paired
// rounds), raw JetStream async publish (throughput) and raw
// publish-to-delivery (latency), in each sync mode.
func Route(ctx context.Context, cfg RouteConfig, progress func(string)) ([]eventbench.Comparison, error) {
	cfg.ensureDefaults()
	var out []eventbench.Comparison
	for _, mode := range cfg.SyncModes {
		cs, err := routeMode(ctx, cfg, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		auth, err := routeAuthCost(ctx, cfg, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", mode, err)
		}
		out = append(append(out, cs...), auth)
	}
	return out, nil
}

// durableTarget is the target of the routed path over the bare chain in a
// sync mode: the durable-throughput target with --sync always, none (for
// information) with interval.
func durableTarget(mode string) float64 {
	if mode == broker.SyncAlways {
		return TargetDurableThroughput
	}
	return 0
}

func routeMode(ctx context.Context, cfg RouteConfig, mode string, progress func(string)) ([]eventbench.Comparison, error) {
	report := func(s string) { say(progress, fmt.Sprintf("sync %s: %s", mode, s)) }
	b, err := broker.Start(ctx, broker.Options{DataDir: fmt.Sprintf("%s/route-%s", cfg.DataDir, mode), Listen: broker.ListenNone, Sync: mode, Name: "bench"})
	if err != nil {
		return nil, err
	}
	defer b.Close()

	report(fmt.Sprintf("raw: %d async publishes", cfg.Messages))
	raw, err := newRawStream(ctx, b)
	if err != nil {
		return nil, err
	}
	rawPub, err := raw.publish(ctx, cfg.Messages)
	if err != nil {
		return nil, err
	}

	ch, stopChain, err := newChain(ctx, b, 4*cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	defer stopChain()
	stopAgents, err := startAgentsOn(ctx, cfg, b)
	if err != nil {
		return nil, err
	}
	defer stopAgents()
	vsChain, err := eventbench.Paired(fmt.Sprintf("durable throughput: routed path vs bare two-hop chain (sync %s)", mode), routeRounds, durableTarget(mode),
		routedRounds(ctx, b, cfg.Messages, routeRounds, "as fast as they go", report),
		func(round int) (eventbench.Measure, error) {
			report(fmt.Sprintf("round %d/%d: bare chain: %d messages through two consume -> publish -> ack hops", round+1, routeRounds, cfg.Messages))
			m, _, err := ch.run(ctx, cfg.Messages, nil)
			return m, err
		})
	if err != nil {
		return nil, err
	}
	rate := cfg.latencyRate(rawPub, vsChain.Sylk, vsChain.Baseline)
	report(fmt.Sprintf("latency: %d messages at %d/s, raw publish to delivery, through the bare chain, then routed", cfg.LatencyMessages, rate))
	rawLat, err := raw.latency(ctx, cfg.LatencyMessages, rate)
	if err != nil {
		return nil, err
	}
	_, chainLat, err := ch.run(ctx, cfg.LatencyMessages, newPacer(rate))
	if err != nil {
		return nil, err
	}
	_, lat, err := routed(ctx, b, cfg.LatencyMessages, newPacer(rate), nil)
	if err != nil {
		return nil, err
	}
	sylk, chain, rawPub := withLatency(vsChain.Sylk, lat), withLatency(vsChain.Baseline, chainLat), withLatency(rawPub, rawLat)
	vsChain.Sylk, vsChain.Baseline = sylk, chain
	return []eventbench.Comparison{
		vsChain,
		// For information: raw async publish stores one message where the
		// routed path stores three, so the target is set against the chain.
		eventbench.Compare(fmt.Sprintf("routed path vs raw async publish (sync %s)", mode), sylk, rawPub, 0),
		eventbench.Compare(fmt.Sprintf("bare chain vs raw async publish (sync %s)", mode), chain, rawPub, 0),
		latencyComparison(fmt.Sprintf("routed p50 latency vs raw delivery (sync %s)", mode), rate, "sylk", lat, "raw", rawLat, 0.50, TargetLatencyFactor),
		latencyComparison(fmt.Sprintf("routed p99 latency vs raw delivery (sync %s)", mode), rate, "sylk", lat, "raw", rawLat, 0.99, TargetLatencyFactor),
		latencyComparison(fmt.Sprintf("bare chain p50 latency vs raw delivery (sync %s)", mode), rate, "chain", chainLat, "raw", rawLat, 0.50, 0),
		latencyComparison(fmt.Sprintf("bare chain p99 latency vs raw delivery (sync %s)", mode), rate, "chain", chainLat, "raw", rawLat, 0.99, 0),
	}, nil
}

// withLatency is m with the p50 and p99 of the latencies ds.
func withLatency(m eventbench.Measure, ds []time.Duration) eventbench.Measure {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	m.P50MS, m.P99MS = ms(quantile(ds, 0.50)), ms(quantile(ds, 0.99))
	return m
}

// startAgents runs the Guide and the benchmark's Librarian, each on the
// JetStream context js gives for its kind, until stop; they group-commit
// their outputs on a stream of syncMode always, as sylk serve has them do.
func startAgents(ctx context.Context, cfg RouteConfig, syncMode string, js func(kind string) jetstream.JetStream) (stop func(), err error) {
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	for _, r := range []struct {
		agent string
		h     agents.Handler
	}{{guide.Name, &guide.Guide{}}, {"librarian", agents.HandlerFunc(answer)}} {
		runner, err := agents.NewRunner(js(r.agent), r.h, agents.Options{Agent: r.agent, Concurrency: cfg.Concurrency, PerSession: cfg.Concurrency, MaxAckPending: 4 * cfg.Concurrency,
			GroupCommit: syncMode == broker.SyncAlways})
		if err != nil {
			stop()
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); runner.Run(rctx) }()
	}
	return stop, nil
}

// startAgentsOn runs the Guide and the benchmark's Librarian on b's own
// connection, in b's sync mode, until stop.
func startAgentsOn(ctx context.Context, cfg RouteConfig, b *broker.Broker) (stop func(), err error) {
	return startAgents(ctx, cfg, b.Options().Sync, func(string) jetstream.JetStream { return b.JetStream() })
}

// routedRounds is one side of a paired comparison of the routed path (see
// eventbench.Paired), the agents running on b: each round routes n
// messages as fast as they go, announced to report, an error naming the side.
func routedRounds(ctx context.Context, b *broker.Broker, n, rounds int, side string, report func(string)) func(int) (eventbench.Measure, error) {
	return func(round int) (eventbench.Measure, error) {
		report(fmt.Sprintf("round %d/%d: %d context requests routed by the Guide and answered, %s", round+1, rounds, n, side))
		m, _, err := routed(ctx, b, n, nil, nil)
		if err != nil {
			return m, fmt.Errorf("%s: %w", side, err)
		}
		return m, nil
	}
}

// answer is the benchmark's Librarian: it replies at once.
func answer(_ context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	out, err := d.Derive(schemas.TypeContextResponse, "bench", "answer", schemas.ContextResponse{Answer: "ok"})
	return []*schemas.Envelope{out}, err
}

// latencyComparison turns two latency samples, both taken at rate messages
// per second, into a comparison at quantile q: speed is 1/latency, so ratio =
// raw latency / Sylk latency. The target is a latency at most factor times
// the raw one; a zero factor reports for information.
func latencyComparison(name string, rate int, sylkLabel string, sylk []time.Duration, rawLabel string, raw []time.Duration, q, factor float64) eventbench.Comparison {
	s, r := quantile(sylk, q), quantile(raw, q)
	m := func(n string, d time.Duration, count int) eventbench.Measure {
		return eventbench.Measure{Name: fmt.Sprintf("%s p%.0f %s at %d/s", n, q*100, d, rate), Ops: count, Seconds: d.Seconds(), PerSec: 1 / d.Seconds()}
	}
	target := 0.0
	if factor > 0 {
		target = 1 / factor
	}
	return eventbench.Compare(name, m(sylkLabel, s, len(sylk)), m(rawLabel, r, len(raw)), target)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// rawStream is the raw baseline: a stream like SYLK in bare JetStream.
type rawStream struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	body   []byte
}

func newRawStream(ctx context.Context, b *broker.Broker) (*rawStream, error) {
	js := b.JetStream()
	scfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	scfg.Name, scfg.Subjects = "BENCH_RAW", []string{"bench.raw.>"}
	stream, err := js.CreateOrUpdateStream(ctx, scfg)
	if err != nil {
		return nil, err
	}
	return &rawStream{js: js, stream: stream, body: make([]byte, 600)}, nil
}

// publish measures n async publishes, as fast as they go.
func (r *rawStream) publish(ctx context.Context, n int) (eventbench.Measure, error) {
	return eventbench.Time("jetstream PublishAsync", n, func() error {
		for range n {
			if _, err := r.js.PublishAsync("bench.raw.pub", r.body, jetstream.WithStallWait(time.Minute)); err != nil {
				return err
			}
		}
		select {
		case <-r.js.PublishAsyncComplete():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// latency publishes n messages at rate a second and returns each one's
// publish-to-delivery latency through a pull consumer.
func (r *rawStream) latency(ctx context.Context, n, rate int) ([]time.Duration, error) {
	cons, err := r.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", FilterSubject: "bench.raw.lat", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return nil, err
	}
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
		return nil, err
	}
	defer cc.Stop()
	pace := newPacer(rate)
	for i := range n {
		pace.wait(i)
		m := nats.NewMsg("bench.raw.lat")
		m.Data = r.body
		k := fmt.Sprint(i)
		m.Header.Set("k", k)
		mu.Lock()
		sent[k] = time.Now()
		mu.Unlock()
		if _, err := r.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			return nil, err
		}
	}
	select {
	case <-done:
		return lats, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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

// chain is what the routed path asks of JetStream, done in bare JetStream
// with as little client work as it allows: messages shaped like Sylk's (the
// same body and headers, a Nats-Msg-Id each, subjects of the same scheme over
// as many sessions) are published async to hop 0; two durable consumers,
// filtered like agents' consumers, each take a message, publish a copy to the
// next hop without waiting and ack the message once the copy is stored; a core
// subscription sees the last hop arrive. Three stored messages, two
// deliveries and two acks a message, as on the routed path, and nothing else:
// the bare chain that Sylk's routed path is measured against. Each message is
// stored on its own (with --sync always, one fsync each), as a client that
// publishes one event at a time has it; the routed path's group commit
// stores an agent's concurrent outputs under one.
type chain struct {
	js       jetstream.JetStream
	body     []byte
	header   nats.Header
	subjects []string // of hop 0, a session each
	runs     int

	mu      sync.Mutex
	sent    []time.Time
	lats    []time.Duration
	arrived chan struct{}
}

func newChain(ctx context.Context, b *broker.Broker, inflight int) (*chain, func(), error) {
	js := b.JetStream()
	env, err := contextRequest(0)
	if err != nil {
		return nil, nil, err
	}
	m, err := events.Message(env)
	if err != nil {
		return nil, nil, err
	}
	c := &chain{js: js, body: m.Data, header: m.Header}
	for i := range routeSessions {
		c.subjects = append(c.subjects, fmt.Sprintf("bench.v1.S%d.user.hop0.context_request", i))
	}
	scfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	scfg.Name, scfg.Subjects = "BENCH_CHAIN", []string{"bench.v1.>"}
	stream, err := js.CreateOrUpdateStream(ctx, scfg)
	if err != nil {
		return nil, nil, err
	}
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	sub, err := b.Conn().Subscribe(chainFilter(2), c.arrive)
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, func() { sub.Unsubscribe() })
	for hop := range 2 {
		cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("hop%d", hop),
			FilterSubject: chainFilter(hop), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: inflight})
		if err != nil {
			stop()
			return nil, nil, err
		}
		type forwarded struct {
			in  jetstream.Msg
			out jetstream.PubAckFuture
		}
		acks := make(chan forwarded, inflight)
		target, suffix := fmt.Sprintf(".hop%d.", hop+1), fmt.Sprintf("/%d", hop+1)
		cc, err := cons.Consume(func(in jetstream.Msg) {
			out := &nats.Msg{Subject: retarget(in.Subject(), target), Data: in.Data(), Header: in.Headers()}
			out.Header.Set(jetstream.MsgIDHeader, out.Header.Get(jetstream.MsgIDHeader)+suffix)
			f, err := js.PublishMsgAsync(out, jetstream.WithStallWait(time.Minute))
			if err != nil {
				in.Nak()
				return
			}
			acks <- forwarded{in, f}
		}, jetstream.PullMaxMessages(inflight))
		if err != nil {
			stop()
			return nil, nil, err
		}
		go func() {
			for fw := range acks {
				select {
				case <-fw.out.Ok():
					fw.in.Ack()
				case <-fw.out.Err():
					fw.in.Nak()
				}
			}
		}()
		stops = append(stops, func() { cc.Stop(); <-cc.Closed(); close(acks) })
	}
	return c, stop, nil
}

// chainFilter is the filter of a chain hop's consumer, like an agent's:
// bench.v1.<session>.<source>.hop<N>.<type>.
func chainFilter(hop int) string { return fmt.Sprintf("bench.v1.*.*.hop%d.*", hop) }

// retarget replaces the target token of a subject of the event scheme with
// target, dots included.
func retarget(subject, target string) string {
	i := 0
	for range 4 {
		i += strings.IndexByte(subject[i:], '.') + 1
	}
	j := i + strings.IndexByte(subject[i:], '.')
	return subject[:i-1] + target + subject[j+1:]
}

// arrive records a message reaching the end of the chain.
func (c *chain) arrive(m *nats.Msg) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	i, err := strconv.Atoi(id[strings.LastIndexByte(id, ':')+1 : strings.IndexByte(id, '/')])
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || i >= len(c.sent) {
		return
	}
	c.lats = append(c.lats, time.Since(c.sent[i]))
	if len(c.lats) == len(c.sent) {
		close(c.arrived)
	}
}

// run sends n messages through the chain (spaced by pace, unless nil) and
// waits for all of them to arrive; it returns their latencies.
func (c *chain) run(ctx context.Context, n int, pace *pacer) (eventbench.Measure, []time.Duration, error) {
	c.runs++
	prefix := fmt.Sprintf("run%d:", c.runs)
	c.mu.Lock()
	c.sent, c.lats, c.arrived = make([]time.Time, n), make([]time.Duration, 0, n), make(chan struct{})
	c.mu.Unlock()
	m, err := eventbench.Time("jetstream: publish, then 2 x (consume, publish, ack), pipelined", n, func() error {
		if pace != nil {
			pace.start = time.Now()
		}
		for i := range n {
			pace.wait(i)
			h := maps.Clone(c.header)
			h.Set(jetstream.MsgIDHeader, prefix+strconv.Itoa(i)+"/0")
			c.mu.Lock()
			c.sent[i] = time.Now()
			c.mu.Unlock()
			if _, err := c.js.PublishMsgAsync(&nats.Msg{Subject: c.subjects[i%len(c.subjects)], Data: c.body, Header: h}, jetstream.WithStallWait(time.Minute)); err != nil {
				return err
			}
		}
		select {
		case <-c.arrived:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return m, c.lats, err
}

// routeSessions is how many sessions the routed path's messages are spread over.
const routeSessions = 32

// contextRequest is the routed path's message: an unaddressed context request
// from the user in session S<session>.
func contextRequest(session int) (*schemas.Envelope, error) {
	return schemas.New(schemas.TypeContextRequest, fmt.Sprintf("S%d", session), "user", "", time.Now(), schemas.ContextRequest{Query: "where is the config loader?"})
}

// routed appends n unaddressed context requests and waits for every answer,
// then for settle if set; each latency is from before the append to the
// answer's arrival.
func routed(ctx context.Context, b *broker.Broker, n int, pace *pacer, settle func(context.Context, uint64) error) (eventbench.Measure, []time.Duration, error) {
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
		if envs[i], err = contextRequest(i % routeSessions); err != nil {
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
		case <-ctx.Done():
			return ctx.Err()
		}
		if settle == nil {
			return nil
		}
		last, err := log.LastSeq(ctx)
		if err != nil {
			return err
		}
		return settle(ctx, last)
	})
	return m, lats, err
}
