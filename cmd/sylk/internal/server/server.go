// Package server is the runtime `sylk serve` runs, and that a command runs
// for its own duration when no server owns the data directory: the broker,
// the projections store with its query API, the projector and the agents.
package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/pressure"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/agents/schedule"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/metrics"
	"github.com/sylk/sylk/cmd/sylk/internal/web"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/audit"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Server is a running broker with the projections store and the components
// `sylk serve` runs over them.
type Server struct {
	broker *broker.Broker
	store  *projections.Store
	api    *api.Service
	cancel context.CancelFunc
	group  *errgroup.Group
	// failed is closed when a component returns an error.
	failed <-chan struct{}
	// httpURL is the HTTP listener's URL, "" without one; metrics are
	// what it serves.
	httpURL string
	// auditKey signs the audit chain; nil without the broker role.
	auditKey ed25519.PrivateKey
	// refusals are what the server refuses (connections, and publishes and
	// subscriptions its permissions forbid), recorded as audit records; nil
	// without the broker role or authentication.
	refusals *broker.RefusalWatch
	metrics  *metrics.Metrics
	web      *web.Web
	// live is what a configuration reload changes.
	live live
}

// serverComponent runs beside the broker until ctx ends.
type serverComponent struct {
	name string
	run  func(ctx context.Context, s *Server) error
}

// ProjectionsDir is where the Pebble projections live in a data directory.
func ProjectionsDir(dataDir string) string { return filepath.Join(dataDir, "projections") }

// Options say what a server runs.
type Options struct {
	// Broker is the broker to start (DeferInfo is set here).
	Broker broker.Options
	// Runtime is the agents' configuration; the agents component adds the
	// stream, the store and the LLM client.
	Runtime runtime.Config
	// LLM returns the LLM configuration, checked: llm.ErrNotConfigured
	// means the agents run without one.
	LLM func() (llm.Config, error)
	// HTTP, if set, is the address of the HTTP listener serving /metrics
	// and the web view.
	HTTP string
	// Insecure lets HTTP listen on an address other machines can reach.
	Insecure bool
	// Roles are what this process runs (RoleBroker, RoleProjections,
	// RoleAgents; see CheckRoles); nil runs them all.
	Roles []string
	// Scheduler fires due schedules (`sylk serve`; not the servers commands
	// start for their own duration).
	Scheduler bool
	// Reload, if set, reads the configuration again after an edit of a
	// config file (ConfigFile) in one of the Watch directories; the server
	// takes what it can without a restart (see Reload).
	Reload func() Reload
	Watch  []string
}

// The roles of a server process.
const (
	// RoleBroker runs the embedded NATS server (and the audit signer).
	RoleBroker = "broker"
	// RoleProjections folds the stream into this process's store and
	// answers the query API (and /metrics) from it.
	RoleProjections = "projections"
	// RoleAgents runs the agents (Runtime.Agents says which).
	RoleAgents = "agents"
)

// Roles are every role, the default.
var Roles = []string{RoleBroker, RoleProjections, RoleAgents}

// CheckRoles says what is wrong with a process's roles: an unknown one, a
// broker with an external server, no broker without one, agents without the
// projections they read.
func CheckRoles(roles []string, natsURL string) error {
	for _, r := range roles {
		if !slices.Contains(Roles, r) {
			return fmt.Errorf("--roles %q: the roles are %s", r, strings.Join(Roles, ", "))
		}
	}
	switch {
	case len(roles) == 0:
		return fmt.Errorf("--roles is empty: give one or more of %s", strings.Join(Roles, ", "))
	case slices.Contains(roles, RoleBroker) && natsURL != "":
		return fmt.Errorf("--roles %s with --nats-url %s: a process runs its own broker or uses another's; drop broker from --roles, or --nats-url", strings.Join(roles, ","), natsURL)
	case !slices.Contains(roles, RoleBroker) && natsURL == "":
		return fmt.Errorf("--roles %s without broker: give --nats-url with the servers to use (several, comma-separated, for a cluster)", strings.Join(roles, ","))
	case slices.Contains(roles, RoleAgents) && !slices.Contains(roles, RoleProjections):
		return fmt.Errorf("--roles %s: the agents read the projections of their process; add projections", strings.Join(roles, ","))
	}
	return nil
}

func (o Options) runs(role string) bool { return o.Roles == nil || slices.Contains(o.Roles, role) }

// Start starts an embedded broker on the data directory, opens the
// projections store and runs the server's components over them.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.HTTP != "" && !o.runs(RoleProjections) {
		return nil, fmt.Errorf("--http %s serves metrics folded by the projections: add projections to --roles", o.HTTP)
	}
	opts := o.Broker
	opts.DeferInfo = true
	var key ed25519.PrivateKey
	if o.runs(RoleBroker) && opts.NATSURL == "" {
		// Before the broker, which a cluster member starts only once its
		// peers are up: the key exists to be copied to them.
		var err error
		if key, err = audit.LoadKey(opts.DataDir); err != nil {
			return nil, err
		}
	}
	ln, err := listenHTTP(o.HTTP, o.Insecure)
	if err != nil {
		return nil, err
	}
	b, err := broker.Start(ctx, opts)
	if err != nil {
		return nil, errors.Join(err, closeListener(ln))
	}
	s := &Server{broker: b, auditKey: key}
	if o.runs(RoleProjections) {
		if err := s.openProjections(ctx, opts.DataDir); err != nil {
			return nil, errors.Join(err, b.Close(), closeListener(ln))
		}
	}
	if o.runs(RoleBroker) {
		// Subscribed before server.json says the server is up: a client
		// refused right after finds its refusal recorded.
		if s.refusals, err = b.WatchRefusals(); err != nil {
			return nil, errors.Join(err, s.api.Stop(), s.store.Close(), b.Close(), closeListener(ln))
		}
	}
	comps := components(o)
	if ln != nil {
		b.AdvertiseHTTP("http://" + ln.Addr().String())
		// Served by a component: it stops with the others.
		comps = append(comps, httpComponent(ln))
	}
	cctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(cctx)
	s.cancel, s.group, s.failed = cancel, g, gctx.Done()
	if ln != nil {
		s.httpURL = "http://" + ln.Addr().String()
		s.metrics = metrics.New(b.JetStream(), s.store)
		if s.web, err = startWeb(cctx, b, s.store, o.Runtime.Tools.Secrets); err != nil {
			cancel()
			return nil, errors.Join(err, s.api.Stop(), s.store.Close(), b.Close(), closeListener(ln))
		}
	}
	for _, c := range comps {
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
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// openProjections opens the store and serves the query API from it. The
// API answers before server.json says the server is up: a client that finds
// the file finds the API.
func (s *Server) openProjections(ctx context.Context, dataDir string) error {
	store, err := projections.Open(ctx, projections.Options{Dir: ProjectionsDir(dataDir), Logger: slog.Default()})
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	svc, err := api.Serve(ctx, s.broker.Conn(), store, events.New(s.broker.JetStream()), slog.Default())
	if err != nil {
		return errors.Join(fmt.Errorf("api: %w", err), store.Close())
	}
	s.store, s.api = store, svc
	return nil
}

// Settle waits until every agent has nothing pending or unacked (the
// Archivalist's entry for a workflow that just ended, a last notice), so that
// stopping an embedded server cuts nothing off. A cancelled ctx (Ctrl-C) skips
// it.
func (s *Server) Settle(ctx context.Context, within time.Duration) {
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

func (s *Server) idle(ctx context.Context) bool {
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

// HTTPURL is the HTTP listener's URL ("" without one).
func (s *Server) HTTPURL() string { return s.httpURL }

// WebURL is the web view's address with its token ("" without a listener).
func (s *Server) WebURL() string {
	if s.web == nil {
		return ""
	}
	return s.httpURL + "/?token=" + s.web.Token()
}

// Broker is the server's broker: the connection its components use.
func (s *Server) Broker() *broker.Broker { return s.broker }

// Failed is closed when a component returns an error.
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Stop ends the components and the API, then closes the store and the broker.
func (s *Server) Stop() error {
	s.cancel()
	errs := []error{s.group.Wait()}
	if s.web != nil {
		s.web.Close()
	}
	if s.store != nil {
		errs = append(errs, s.api.Stop(), s.store.Close())
	}
	return errors.Join(append(errs, s.broker.Close())...)
}

// components lists what runs beside the broker: the projector folding the
// stream into the store, the agents, the scheduler and the config watcher
// (`sylk serve`), and the audit chain's signer (on the server that owns the
// data directory, whose key signs) and the recorder of the connections it
// refuses.
func components(o Options) []serverComponent {
	all := []serverComponent{
		{"audit", func(ctx context.Context, s *Server) error {
			if s.auditKey == nil {
				return nil
			}
			return (&audit.Signer{JS: s.broker.JetStream(), Key: s.auditKey, Logger: slog.Default()}).Run(ctx)
		}},
		{"refusals", func(ctx context.Context, s *Server) error {
			// What the server refused is an audit record: who (address,
			// key, user, connection name), what and the server's reason.
			log := events.New(s.broker.JetStream())
			return s.refusals.Run(ctx, func(r broker.Refusal) {
				env, err := schemas.New(schemas.TypeAuditRecord, schemas.SystemSession, "user", "user", time.Now(), refusalRecord(r))
				if err == nil {
					_, err = log.Append(ctx, env)
				}
				if err != nil && ctx.Err() == nil {
					slog.Warn("record a refusal", "action", r.Action, "host", r.Host, "err", err)
				}
			})
		}},
		{"quota", func(ctx context.Context, s *Server) error {
			// The stream's disk quota: warnings at 80% and 90%; and the
			// governor pausing scheduled work under that pressure or the
			// memory's (with the projections in this process, which it
			// reads).
			log := events.New(s.broker.JetStream())
			if s.store == nil {
				return log.WatchQuota(ctx, quotaInterval, nil)
			}
			gov := &pressure.Governor{Log: log, Sessions: s.store, Resources: []string{pressure.ResourceDisk}}
			if _, err := pressure.ReadMemory("/"); err == nil {
				// A resource that is never read would hold paused work
				// forever: the memory is awaited only where it can be read.
				gov.Resources = append(gov.Resources, pressure.ResourceMemory)
			}
			report := func(err error) {
				if err != nil && ctx.Err() == nil {
					slog.Error("pressure", "err", err)
				}
			}
			memory := make(chan struct{})
			go func() {
				defer close(memory)
				pressure.WatchMemory(ctx, quotaInterval, func() (pressure.Memory, error) { return pressure.ReadMemory("/") },
					func(m pressure.Memory) { report(gov.ObserveMemory(ctx, m)) })
			}()
			defer func() { <-memory }()
			return log.WatchQuota(ctx, quotaInterval, func(q schemas.StreamQuota) { report(gov.Observe(ctx, q)) })
		}},
		{"projector", func(ctx context.Context, s *Server) error {
			return s.store.Projector(events.New(s.broker.JetStream())).Run(ctx)
		}},
		{"scheduler", func(ctx context.Context, s *Server) error {
			if !o.Scheduler {
				return nil
			}
			cfg := o.Runtime
			cat := cfg.Catalog()
			if _, err := o.LLM(); err == nil {
				cat.PromptAgents = runtime.ToolAgents()
			}
			return (&schedule.Scheduler{Log: events.New(s.broker.JetStream()), Store: s.store, Catalog: cat, Now: time.Now, Logger: slog.Default()}).Run(ctx)
		}},
		{"config", func(ctx context.Context, s *Server) error {
			if o.Reload == nil {
				return nil
			}
			return s.watchConfig(ctx, o)
		}},
		{"agents", func(ctx context.Context, s *Server) error {
			cfg := o.Runtime
			cfg.JetStream, cfg.Store = s.broker.JetStream(), s.store
			if s.metrics != nil {
				cfg.OnRunner = func(r *agents.Runner) { s.metrics.AddRunner(r) }
				s.metrics.SetPool(cfg.Tools.Pool)
			}
			cfg.OnHooks = func(hp *hooks.Pipeline) { s.live.set(func(l *live) { l.hooks = hp }) }
			slog.Info("tool memory limit: " + cfg.Tools.MemoryLimitText())
			if cfg.Tools.Pool != nil {
				slog.Info("tool processes: " + poolText(cfg.Tools.Pool))
			}
			client, closeLLM, err := startLLM(ctx, o.LLM, s, cfg.Tools.Secrets)
			if err != nil {
				return err
			}
			cfg.LLM = client
			if cfg.Embedder, err = embedder(o.LLM); err != nil {
				return errors.Join(err, closeLLM())
			}
			s.live.set(func(l *live) { l.runtime, l.llm = cfg, client })
			err = runtime.Run(ctx, cfg)
			return errors.Join(err, closeLLM())
		}},
	}
	role := map[string]string{"config": "", "audit": RoleBroker, "refusals": RoleBroker, "quota": RoleBroker, "projector": RoleProjections, "scheduler": RoleAgents, "agents": RoleAgents}
	// The config watcher runs whatever the roles: every process logs.
	return slices.DeleteFunc(all, func(c serverComponent) bool { return role[c.name] != "" && !o.runs(role[c.name]) })
}

// embedder is the embedder the configuration names (with or without a chat
// model), nil when it names none: the Librarian's search is then BM25 only.
func embedder(llmConfig func() (llm.Config, error)) (*llm.Embedder, error) {
	cfg, err := llmConfig()
	if err != nil && !errors.Is(err, llm.ErrNotConfigured) {
		return nil, err
	}
	e, err := llm.NewEmbedder(cfg, nil)
	if errors.Is(err, llm.ErrNoEmbeddings) {
		return nil, nil
	}
	if err == nil {
		slog.Info("embeddings", "model", e.Model(), "dims", e.Dims())
	}
	return e, err
}

// startLLM makes the LLM client the agents share, when an LLM is configured:
// calls recorded in the store, budgets counted by a ledger that folds every
// llm_usage event of the stream and follows new ones (so they hold across
// processes and restarts), tokens streamed live on core NATS, secrets
// redacted before anything is sent or recorded. A rate-limit pause left
// behind by a process that stopped is ended first. stop must be called
// after the agents stop: it ends a pause this client started and stops the
// ledger.
func startLLM(ctx context.Context, llmConfig func() (llm.Config, error), s *Server, secrets tools.SecretOptions) (client *llm.Client, stop func() error, err error) {
	cfg, err := llmConfig()
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

// quotaInterval is how often the server reads the stream's use of its quota.
const quotaInterval = 5 * time.Second

// poolText says a tool process pool's limits, as the server logs them.
func poolText(p *tools.Pool) string {
	size, reserved := p.Limits()
	return fmt.Sprintf("at most %d at once, %d of them kept for the user's own requests", size, reserved)
}

// refusalRecord is the audit record of what the server refused: a
// connection's target is its address, a publish's or subscription's its
// subject. A summary of the refusals the rate limit left out says how many.
func refusalRecord(r broker.Refusal) schemas.AuditRecord {
	details := map[string]string{"host": r.Host}
	for k, v := range map[string]string{"user": r.User, "username": r.Username, "name": r.Name, "subject": r.Subject} {
		if v != "" {
			details[k] = v
		}
	}
	target, reason := r.Host, r.Reason
	if r.Action != broker.RefusedConnect {
		target = r.Subject
	}
	if r.Suppressed > 0 {
		details["suppressed"] = strconv.Itoa(r.Suppressed)
		reason = fmt.Sprintf("%d more refused %s of this client in the last minute, not recorded one by one (at most %d a minute are); the last: %s",
			r.Suppressed, r.Action, broker.RefusalsPerMinute, r.Reason)
	}
	return schemas.AuditRecord{Category: schemas.AuditPermission, Action: r.Action, Target: target, Outcome: schemas.OutcomeDenied, Reason: reason, Details: details}
}
