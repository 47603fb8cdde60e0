// Package runtime wires Sylk's agents into runners over one event log and one
// projections store: what `sylk serve` (and `sylk run` with no server) runs.
// Every agent loop is supervised: a crash restarts it, within limits, and the
// restart is an agent_restart event.
package runtime

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/archivalist"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// The agents that run tool nodes.
var toolAgents = []string{"engineer", "inspector", "tester"}

// Config configures the runtime.
type Config struct {
	JetStream jetstream.JetStream
	Store     *projections.Store
	// Tools are the base options of every tool executor; WorkDir is set per
	// DAG (its submitter's directory), DefaultWorkDir when it has none.
	Tools          tools.Options
	DefaultWorkDir string
	// Concurrency of each tool agent in this process.
	Concurrency int
	// Agents to run; nil runs them all.
	Agents []string
	// Classifier and Prompter plug in the LLM tier; nil without an LLM.
	Classifier guide.Classifier
	Prompter   worker.Prompter
	// PromptAgents run prompt nodes (with an LLM).
	PromptAgents []string
	LLMHint      string
	// AckWait of the agents' consumers (default agents.DefaultAckWait).
	AckWait time.Duration
	Logger  *slog.Logger
}

// Catalog is what DAGs are validated against: which agents run nodes, the
// tools that exist and who may use which.
func (c *Config) Catalog() plan.Catalog {
	policy := c.Tools.Permissions
	if policy.Agents == nil { // as Run does
		policy = tools.DefaultPolicy()
	}
	var names []string
	for _, s := range builtinTools(c.Tools) {
		names = append(names, s.Name)
	}
	return plan.Catalog{ToolAgents: toolAgents, PromptAgents: c.PromptAgents, Tools: names, Allowed: policy.Allows}
}

func builtinTools(opts tools.Options) []tools.ToolSpec {
	opts.WorkDir = "."
	ex, err := tools.NewExecutor(opts)
	if err != nil {
		return nil
	}
	return ex.Schemas()
}

// agent is one runner to start.
type agent struct {
	opts    agents.Options
	handler agents.Handler
}

func (c *Config) agents() []agent {
	log := events.New(c.JetStream)
	executors := &worker.Executors{Options: c.Tools, DefaultDir: c.DefaultWorkDir}
	base := func(name string) agents.Options {
		return agents.Options{Agent: name, Caught: c.Store, Logger: c.Logger, AckWait: c.AckWait}
	}
	all := []agent{
		{base(guide.Name), &guide.Guide{State: guideState{store: c.Store, log: log}, Classifier: c.Classifier, LLMHint: c.LLMHint}},
		{withOpts(base(orchestrator.Name), func(o *agents.Options) { o.PerSession = 1; o.Concurrency = 4 }),
			&orchestrator.Orchestrator{Store: c.Store, Log: log, Catalog: c.Catalog()}},
		{withOpts(base(archivalist.Name), func(o *agents.Options) { o.Filters = archivalist.Filters() }), archivalist.Archivalist{}},
	}
	judges := map[string]worker.Judge{"engineer": worker.ByExit, "inspector": worker.ByFindings, "tester": worker.ByTests}
	for _, name := range toolAgents {
		w := &worker.Worker{Agent: name, Executors: executors, Records: c.Store, Judge: judges[name], Prompter: c.Prompter, LLMHint: c.LLMHint}
		if name == "tester" {
			w.Prepare = worker.GoTestJSON
		}
		all = append(all, agent{withOpts(base(name), func(o *agents.Options) {
			o.Concurrency = c.Concurrency
			o.SkipCancelled = true
		}), w})
	}
	if c.Agents == nil {
		return all
	}
	return slices.DeleteFunc(all, func(a agent) bool { return !slices.Contains(c.Agents, a.opts.Agent) })
}

func withOpts(o agents.Options, f func(*agents.Options)) agents.Options {
	f(&o)
	return o
}

// Names are the agents Run starts with cfg.
func (c *Config) Names() []string {
	var out []string
	for _, a := range c.agents() {
		out = append(out, a.opts.Agent)
	}
	return out
}

// Run runs every configured agent until ctx ends. A loop that fails is
// restarted within agents.DefaultRestartLimits; one that fails more often stops
// the runtime with the error.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = agents.DefaultConcurrency
	}
	if cfg.Tools.Permissions.Agents == nil {
		cfg.Tools.Permissions = tools.DefaultPolicy()
	}
	log := events.New(cfg.JetStream)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, a := range cfg.agents() {
		runner, err := agents.NewRunner(cfg.JetStream, a.handler, a.opts)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := agents.Supervise(ctx, a.opts.Agent, agents.DefaultRestartLimits, runner.Run, func(n int, reason string) {
				cfg.Logger.Error("agent restarted", "agent", a.opts.Agent, "restarts", n, "reason", reason)
				restarted(ctx, log, a.opts.Agent, n, reason)
			})
			if err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	<-ctx.Done()
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func restarted(ctx context.Context, log *events.Log, agent string, n int, reason string) {
	env, err := schemas.New(schemas.TypeAgentRestart, schemas.SystemSession, "supervisor", "user", time.Now(),
		schemas.AgentRestart{Agent: agent, Reason: reason, Restarts: n})
	if err != nil {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := log.Append(actx, env); err != nil {
		slog.Warn("agent_restart not recorded", "agent", agent, "err", err)
	}
}
