// Package metrics is the Prometheus view of a running server, served at
// /metrics by `sylk serve --http`.
//
// Two kinds of figures, both read from the stream and its consumers, never
// from an agent's memory, so any process attached to the stream reports the
// whole system's:
//
//   - Counters of what happened, folded from the events the stream receives
//     while this process runs, as the process's projector reads them (the
//     metrics have no reader of the stream of their own; Prometheus counters
//     start at zero with their process; rate() and increase() absorb the
//     restarts): events appended by
//     type, tool runs by tool and outcome with their durations, LLM calls,
//     tokens and cost by model. Circuit breaker states are gauges folded
//     from every circuit_change event since the stream began, so a restart
//     does not forget an open breaker.
//   - Gauges read from JetStream and the projections store at scrape time:
//     each consumer's pending and unacknowledged messages, the dead-letter
//     stream's depth, the stream's size, the projections' lag behind it.
//
// Names and labels follow Prometheus conventions (sylk_ prefix, base units,
// _total counters); the README lists them.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Cursor is where the projections stand: the last stream sequence folded.
type Cursor interface {
	Cursor() uint64
}

// Metrics holds a server's registry and the counters it folds from the stream.
type Metrics struct {
	reg   *prometheus.Registry
	js    jetstream.JetStream
	log   *events.Log
	store Cursor

	appended    *prometheus.CounterVec
	toolRuns    *prometheus.CounterVec
	toolSeconds *prometheus.HistogramVec
	llmCalls    *prometheus.CounterVec
	llmTokens   *prometheus.CounterVec
	llmCost     *prometheus.CounterVec
	breakers    *prometheus.GaugeVec
	undecodable prometheus.Counter

	// breakerSeq is the sequence of each breaker's change set last (agent,
	// resource).
	breakerMu  sync.Mutex
	breakerSeq map[[2]string]uint64

	mu      sync.Mutex
	runners []HeldCounter
	pool    *tools.Pool
}

// SetPool reports the tool process pool of this process's agents in
// sylk_tool_processes, sylk_tool_processes_waiting and
// sylk_tool_process_slots.
func (m *Metrics) SetPool(p *tools.Pool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pool = p
}

// HeldCounter is an agent runner of this process: what it holds unstarted
// while its session is paused.
type HeldCounter interface {
	Agent() string
	Held() int
}

// AddRunner reports what r holds in sylk_agent_held_messages.
func (m *Metrics) AddRunner(r HeldCounter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runners = append(m.runners, r)
}

// New registers Sylk's metrics, the Go runtime's and the process's on a fresh
// registry. store may be nil (a process without projections).
func New(js jetstream.JetStream, store Cursor) *Metrics {
	m := &Metrics{
		breakerSeq: map[[2]string]uint64{},
		reg:        prometheus.NewRegistry(),
		js:         js,
		log:        events.New(js),
		store:      store,
		appended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sylk_events_appended_total",
			Help: "Events the stream received while this process ran, by type.",
		}, []string{"type"}),
		toolRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sylk_tool_runs_total",
			Help: "Tool runs that recorded a result, by tool and outcome (ok, failed, timed_out, canceled).",
		}, []string{"tool", "outcome"}),
		toolSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sylk_tool_run_duration_seconds",
			Help:    "How long tool runs took, by tool and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5 ms .. ~22 min
		}, []string{"tool", "outcome"}),
		llmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sylk_llm_calls_total",
			Help: "LLM calls that recorded their usage, by model.",
		}, []string{"model"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sylk_llm_tokens_total",
			Help: "LLM tokens, by model and kind (prompt, completion).",
		}, []string{"model", "kind"}),
		llmCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sylk_llm_cost_usd_total",
			Help: "LLM cost in US dollars, by model, as priced when the call was recorded.",
		}, []string{"model"}),
		breakers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sylk_circuit_breaker_state",
			Help: "1 for each agent's breaker's current state (closed, open, half_open) per resource, 0 for the others.",
		}, []string{"agent", "resource", "state"}),
		undecodable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sylk_events_undecodable_total",
			Help: "Messages on the stream's subjects that are not a valid envelope.",
		}),
	}
	m.reg.MustRegister(m.appended, m.toolRuns, m.toolSeconds, m.llmCalls, m.llmTokens, m.llmCost, m.breakers, m.undecodable,
		&scrape{m: m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the registry in the Prometheus text (or protobuf) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogAdapter{}, Registry: m.reg})
}

// Source hands the metrics each event the stream receives: the process's
// projections store, whose projector reads the stream anyway
// (projections.Store.Observe).
type Source interface {
	Observe(from uint64, fn func(ev *events.Event, payload any)) (start uint64, stop func())
}

// Follow folds every event src's projector reads from now on (the metrics
// have no reader of the stream of their own), and the breaker history before
// them. It returns once it follows; stop ends the fold.
func (m *Metrics) Follow(ctx context.Context, src Source) (stop func(), err error) {
	end, err := m.log.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	start, stop := src.Observe(end, m.fold)
	// The history up to start, while the projector hands over what comes
	// after: a breaker keeps its newest change, by sequence.
	if start > 0 {
		if err := m.log.Scan(ctx, events.Filter{Type: schemas.TypeCircuitChange}.Subject(), events.Cursor{}, start, func(ev *events.Event) error {
			if ev.Env != nil {
				m.observe(ev, nil)
			}
			return nil
		}); err != nil {
			stop()
			return nil, fmt.Errorf("metrics: read circuit breaker history: %w", err)
		}
	}
	return stop, nil
}

// fold counts an event the projector read and folds its measures.
func (m *Metrics) fold(ev *events.Event, payload any) {
	if ev.Err != nil || ev.Env == nil {
		m.undecodable.Inc()
		return
	}
	m.appended.WithLabelValues(string(ev.Env.Type)).Inc()
	m.observe(ev, payload)
}

// observe folds the events that carry measures; payload is the decoded
// payload, or nil to decode it here.
func (m *Metrics) observe(ev *events.Event, payload any) {
	switch ev.Env.Type {
	case schemas.TypeToolResult:
		r, err := payloadOf[schemas.ToolResult](ev, payload)
		if err != nil {
			return
		}
		outcome := toolOutcome(r)
		m.toolRuns.WithLabelValues(r.Tool, outcome).Inc()
		m.toolSeconds.WithLabelValues(r.Tool, outcome).Observe(r.Seconds())
	case schemas.TypeLLMUsage:
		u, err := payloadOf[schemas.LLMUsage](ev, payload)
		if err != nil {
			return
		}
		m.llmCalls.WithLabelValues(u.Model).Inc()
		m.llmTokens.WithLabelValues(u.Model, "prompt").Add(float64(u.Usage.PromptTokens))
		m.llmTokens.WithLabelValues(u.Model, "completion").Add(float64(u.Usage.CompletionTokens))
		m.llmCost.WithLabelValues(u.Model).Add(u.CostUSD)
	case schemas.TypeCircuitChange:
		c, err := payloadOf[schemas.CircuitChange](ev, payload)
		if err != nil {
			return
		}
		m.setBreaker(ev.Seq, ev.Env.Source, c)
	}
}

// setBreaker sets an agent's breaker to the state of its change at seq,
// unless a later change is set already (the history is read while the
// projector hands over the live changes).
func (m *Metrics) setBreaker(seq uint64, agent string, c *schemas.CircuitChange) {
	m.breakerMu.Lock()
	defer m.breakerMu.Unlock()
	key := [2]string{agent, c.Resource}
	if seq <= m.breakerSeq[key] {
		return
	}
	m.breakerSeq[key] = seq
	for _, s := range breakerStates {
		v := 0.0
		if s == c.To {
			v = 1
		}
		m.breakers.WithLabelValues(agent, c.Resource, s).Set(v)
	}
}

// payloadOf is the event's payload as P: the decoded payload if it is one,
// else decoded from the envelope.
func payloadOf[P any](ev *events.Event, payload any) (*P, error) {
	if p, ok := payload.(*P); ok {
		return p, nil
	}
	return schemas.PayloadAs[P](ev.Env)
}

var breakerStates = []string{"closed", "open", "half_open"}

func toolOutcome(r *schemas.ToolResult) string {
	switch {
	case r.TimedOut:
		return "timed_out"
	case r.Canceled:
		return "canceled"
	case r.OK:
		return "ok"
	default:
		return "failed"
	}
}

// scrape reads JetStream and the store when Prometheus asks.
type scrape struct{ m *Metrics }

var (
	consumerPending = prometheus.NewDesc("sylk_consumer_pending_messages",
		"Messages on the stream a consumer has not been delivered yet (its lag).", []string{"consumer"}, nil)
	consumerAckPending = prometheus.NewDesc("sylk_consumer_ack_pending_messages",
		"Messages delivered to a consumer and not acknowledged yet: in work, held while their session is paused, or lost with a process until redelivered.", []string{"consumer"}, nil)
	consumerRedelivered = prometheus.NewDesc("sylk_consumer_redelivered_messages",
		"Messages a consumer has been delivered more than once and not yet acknowledged.", []string{"consumer"}, nil)
	streamMessages = prometheus.NewDesc("sylk_stream_messages", "Messages a stream holds.", []string{"stream"}, nil)
	streamBytes    = prometheus.NewDesc("sylk_stream_bytes", "Bytes a stream holds.", []string{"stream"}, nil)
	streamLastSeq  = prometheus.NewDesc("sylk_stream_last_sequence", "The sequence of a stream's last message.", []string{"stream"}, nil)
	heldMessages   = prometheus.NewDesc("sylk_agent_held_messages",
		"Messages this process's agents hold unstarted because their session, or everything, is paused.", []string{"agent"}, nil)
	toolProcesses = prometheus.NewDesc("sylk_tool_processes",
		"Tool processes running in this process's pool, by lane: the user's own requests, or other (scheduled, background) work.", []string{"lane"}, nil)
	toolWaiting = prometheus.NewDesc("sylk_tool_processes_waiting",
		"Tool calls of other work waiting for a slot of this process's pool (the user's reserve is not theirs).", nil, nil)
	toolSlots = prometheus.NewDesc("sylk_tool_process_slots",
		"The tool process pool's limits: max (at once) and user_reserved (kept for the user's own requests).", []string{"limit"}, nil)
	projectionLag = prometheus.NewDesc("sylk_projection_lag_events",
		"Events the stream holds that this process's projections have not folded yet.", nil, nil)
	scrapeErrors = prometheus.NewDesc("sylk_metrics_scrape_errors",
		"1 if this scrape could not read a part of JetStream (the log says which), else 0.", nil, nil)
)

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{consumerPending, consumerAckPending, consumerRedelivered, streamMessages, streamBytes, streamLastSeq, projectionLag, heldMessages, toolProcesses, toolWaiting, toolSlots, scrapeErrors} {
		ch <- d
	}
}

// scrapeTimeout bounds a scrape's JetStream requests.
const scrapeTimeout = 5 * time.Second

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var last uint64
	for _, name := range []string{broker.Stream, broker.DLQStream} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.m.js.Stream(ctx, name)
			if err != nil {
				fail(fmt.Errorf("stream %s: %w", name, err))
				return
			}
			info, err := st.Info(ctx)
			if err != nil {
				fail(fmt.Errorf("stream %s: %w", name, err))
				return
			}
			ch <- prometheus.MustNewConstMetric(streamMessages, prometheus.GaugeValue, float64(info.State.Msgs), name)
			ch <- prometheus.MustNewConstMetric(streamBytes, prometheus.GaugeValue, float64(info.State.Bytes), name)
			ch <- prometheus.MustNewConstMetric(streamLastSeq, prometheus.GaugeValue, float64(info.State.LastSeq), name)
			if name != broker.Stream {
				return
			}
			mu.Lock()
			last = info.State.LastSeq
			mu.Unlock()
			lister := st.ListConsumers(ctx)
			for c := range lister.Info() {
				// Ephemeral readers (tails, scans, this very tail) come
				// and go: only durable consumers are work.
				if c.Config.Durable == "" {
					continue
				}
				ch <- prometheus.MustNewConstMetric(consumerPending, prometheus.GaugeValue, float64(c.NumPending), c.Name)
				ch <- prometheus.MustNewConstMetric(consumerAckPending, prometheus.GaugeValue, float64(c.NumAckPending), c.Name)
				ch <- prometheus.MustNewConstMetric(consumerRedelivered, prometheus.GaugeValue, float64(c.NumRedelivered), c.Name)
			}
			if err := lister.Err(); err != nil {
				fail(fmt.Errorf("consumers of %s: %w", name, err))
			}
		}()
	}
	wg.Wait()
	held := map[string]int{}
	s.m.mu.Lock()
	for _, r := range s.m.runners {
		held[r.Agent()] += r.Held()
	}
	pool := s.m.pool
	s.m.mu.Unlock()
	if pool != nil {
		u := pool.Usage()
		ch <- prometheus.MustNewConstMetric(toolProcesses, prometheus.GaugeValue, float64(u.User), "user")
		ch <- prometheus.MustNewConstMetric(toolProcesses, prometheus.GaugeValue, float64(u.Other), "other")
		ch <- prometheus.MustNewConstMetric(toolWaiting, prometheus.GaugeValue, float64(u.WaitingOther))
		ch <- prometheus.MustNewConstMetric(toolSlots, prometheus.GaugeValue, float64(u.Size), "max")
		ch <- prometheus.MustNewConstMetric(toolSlots, prometheus.GaugeValue, float64(u.Reserved), "user_reserved")
	}
	for agent, n := range held {
		ch <- prometheus.MustNewConstMetric(heldMessages, prometheus.GaugeValue, float64(n), agent)
	}
	if s.m.store != nil && last > 0 {
		lag := float64(0)
		if c := s.m.store.Cursor(); c < last {
			lag = float64(last - c)
		}
		ch <- prometheus.MustNewConstMetric(projectionLag, prometheus.GaugeValue, lag)
	}
	failed := 0.0
	if len(errs) > 0 {
		failed = 1
		slog.Warn("metrics: scrape", "err", errors.Join(errs...))
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrors, prometheus.GaugeValue, failed)
}

// slogAdapter reports promhttp's errors on the server's log.
type slogAdapter struct{}

func (slogAdapter) Println(v ...any) { slog.Warn("metrics: " + fmt.Sprint(v...)) }
