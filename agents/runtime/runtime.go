// Package runtime wires Sylk's agents into runners over one event log and one
// projections store: what `sylk serve` (and `sylk run` with no server) runs.
// Every agent loop is supervised: a crash restarts it, within limits, and the
// restart is an agent_restart event.
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/academic"
	"github.com/sylk/sylk/agents/architect"
	"github.com/sylk/sylk/agents/archivalist"
	"github.com/sylk/sylk/agents/consult"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/permit"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/skills"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// The agents that run tool nodes (and, with an LLM, prompt nodes).
var toolAgents = []string{"engineer", "inspector", "tester"}

// ToolAgents are the agents that run tool nodes, and prompt nodes with an LLM.
func ToolAgents() []string { return slices.Clone(toolAgents) }

// AgentNames are the agents Run can start, among which Config.Agents chooses.
func AgentNames() []string {
	return append([]string{guide.Name, architect.Name, orchestrator.Name, archivalist.Name, librarian.Name, academic.Name, pipeline.Name}, toolAgents...)
}

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
	// LLM is the process's LLM client; nil without an LLM. With one, the
	// Guide classifies natural language with it (guide.LLMClassifier), the
	// Architect plans with it, and the tool agents run prompt nodes with it
	// (worker.PromptLoop), unless Classifier, Prompter or PromptAgents say
	// otherwise. Without one, each of them answers with LLMHint.
	LLM *llm.Client
	// Embedder makes the Librarian's searches hybrid (BM25 and vectors);
	// nil: BM25 only.
	Embedder *llm.Embedder
	// Classifier and Prompter plug in the LLM tier (default: from LLM).
	Classifier guide.Classifier
	Prompter   worker.Prompter
	// PromptAgents run prompt nodes (default with an LLM: the tool agents).
	PromptAgents []string
	LLMHint      string
	// Records finds the recorded results of tool calls (default: Store). A
	// re-execution answers from a recording through it.
	Records agents.ToolRecords
	// Skills configures the prompt loops' skills and lazy tool loading.
	Skills skills.Config
	// Routes override entries of the Guide's routing table (guide.Guide.Routes)
	// and Prompts the system prompts of the prompt nodes' agents
	// (worker.PromptLoop.Prompts): a re-execution checks such a change
	// against recorded sessions.
	Routes  map[schemas.Type]string
	Prompts map[string]string
	// Hooks are the user hooks (the configuration's `hooks:`), after the
	// built-in hooks of the same priority.
	Hooks []hooks.Config
	// WorktreeDir is where variants' git worktrees go (default
	// $TMPDIR/sylk-variants).
	WorktreeDir string
	// WorkDirStandIn, when set, stands in for work directories that do not
	// exist (worker.Executors.StandIn): a re-execution's.
	WorkDirStandIn string
	// PipelineLoops bounds a pipeline's loops (default
	// schemas.DefaultPipelineLoops).
	PipelineLoops int
	// PipelineHandoffs caps a chain of Engineer handoffs (default
	// schemas.DefaultPipelineHandoffs).
	PipelineHandoffs int
	// AckWait of the agents' consumers (default agents.DefaultAckWait).
	AckWait time.Duration
	// GroupCommit: the stream syncs every write, so the agents append
	// their concurrent handlers' outputs together (agents.Options).
	GroupCommit bool
	Logger      *slog.Logger
	// OnRunner, if set, sees each agent's runner before it starts (metrics
	// read what it holds).
	OnRunner func(*agents.Runner)
	// OnHooks, if set, sees the hook pipeline the agents run, which a
	// configuration reload may Replace.
	OnHooks func(*hooks.Pipeline)
}

// Catalog is what DAGs are validated against: which agents run nodes, the
// tools that exist and who may use which.
func (c *Config) Catalog() plan.Catalog {
	policy := c.Tools.Permissions
	if policy.Agents == nil { // as Run does
		policy = tools.DefaultPolicy()
	}
	var names []string
	argSchemas := map[string]json.RawMessage{}
	for _, s := range builtinTools(c.Tools) {
		names = append(names, s.Name)
		argSchemas[s.Name] = s.Parameters
	}
	prompt := c.PromptAgents
	if prompt == nil && c.LLM != nil {
		prompt = toolAgents
	}
	return plan.Catalog{ToolAgents: toolAgents, PromptAgents: prompt, Tools: names, Allowed: policy.Allows, ArgSchemas: argSchemas}
}

// hookKill is how long a hook program killed at its timeout is given to go
// after SIGINT and after SIGTERM.
const hookKill = 500 * time.Millisecond

// Pipeline is the hook pipeline the agents run: the built-in hooks (step 0
// for the tool agents, the tool allow-list, the git permission matrix,
// session context, the token budgets with an LLM, secret redaction), then the
// user hooks of c.Hooks, whose programs run in DefaultWorkDir.
func (c *Config) Pipeline() (*hooks.Pipeline, error) {
	opts := c.Tools
	if opts.Permissions.Agents == nil {
		opts.Permissions = tools.DefaultPolicy()
	}
	opts.WorkDir = c.DefaultWorkDir
	if opts.WorkDir == "" {
		opts.WorkDir = "."
	}
	opts.Kill = tools.KillOptions{SIGINTGrace: hookKill, SIGTERMGrace: hookKill}
	progs, err := tools.NewExecutor(opts)
	if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	domains := map[string][]schemas.Type{}
	for _, a := range toolAgents {
		// A worker also answers consultations (consult.Wrap).
		domains[a] = append(slices.Clone(worker.Domain), schemas.TypeConsultRequest)
	}
	// The store and, with an LLM, the client are there when the agents run;
	// `sylk hook ls` builds the same pipeline without them, to list it.
	b := hooks.Builtins{Policy: &opts.Permissions, Redactor: progs.Redactor(), Domains: domains, Owner: guide.Owner, Sessions: c.Store}
	if c.LLM != nil || len(c.PromptAgents) > 0 {
		b.Budget = c.LLM
	}
	user, err := hooks.FromConfig(c.Hooks, progs)
	if err != nil {
		return nil, err
	}
	// Recorded decisions are found where recorded tool results are (a
	// re-execution's Records may answer for both).
	var records hooks.Records
	if r, ok := c.Records.(hooks.Records); ok {
		records = r
	} else if c.Store != nil {
		records = c.Store
	}
	return hooks.New(records, append(b.Hooks(), user...)...)
}

// withLLM fills the LLM tier's defaults from c.LLM.
func (c *Config) withLLM(executors *worker.Executors, hp *hooks.Pipeline) {
	if c.LLM == nil {
		return
	}
	if c.Classifier == nil {
		c.Classifier = &guide.LLMClassifier{LLM: c.LLM}
	}
	if c.Prompter == nil {
		c.Prompter = &worker.PromptLoop{LLM: c.LLM, Executors: executors, Records: c.records(), Pipelines: c.Store, Skills: c.Skills, Hooks: hp, Permits: c.permits(), Prompts: c.Prompts,
			Plans: c.Store, Consult: &consult.Consulter{Answers: c.Store}}
	}
	if c.PromptAgents == nil {
		c.PromptAgents = toolAgents
	}
}

// permits is the gate of every exec call of the prompt loops: the safe
// list, the agent's command list, the remembered answers, then the user (nil
// without a store).
func (c *Config) permits() *permit.Gate {
	if c.Store == nil {
		return nil
	}
	return &permit.Gate{Policy: c.Tools.Permissions, Store: c.Store}
}

func (c *Config) records() agents.ToolRecords {
	if c.Records != nil {
		return c.Records
	}
	return c.Store
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

// agents are the runners to start, their messages and calls hooked by hp.
func (c *Config) agents(hp *hooks.Pipeline) []agent {
	log := events.New(c.JetStream)
	executors := &worker.Executors{Options: c.Tools, DefaultDir: c.DefaultWorkDir, StandIn: c.WorkDirStandIn}
	c.withLLM(executors, hp)
	base := func(name string) agents.Options {
		o := agents.Options{Agent: name, Caught: c.Store, Logger: c.Logger, AckWait: c.AckWait, GroupCommit: c.GroupCommit}
		if hp != nil {
			o.Hooks = hp
		}
		return o
	}
	arch := &architect.Architect{Store: c.Store, Catalog: c.Catalog(), Tools: builtinTools(c.Tools), LLMHint: c.LLMHint,
		Executors: executors, Records: c.records()}
	// Every agent that can be consulted answers with a read-only
	// conversation of its own (without an LLM it refuses, saying so).
	responder := &consult.Responder{Executors: executors, Records: c.records(), Sessions: c.Store}
	if c.LLM != nil {
		consulter := &consult.Consulter{Answers: c.Store}
		arch.LLM, arch.Consult = c.LLM, consulter
		responder.LLM, responder.Consult = c.LLM, consulter
	}
	lib := &librarian.Librarian{Store: c.Store, DefaultWorkDir: c.DefaultWorkDir, Embedder: c.Embedder}
	if c.LLM != nil {
		lib.LLM = c.LLM
	}
	all := []agent{
		{base(guide.Name), &guide.Guide{State: guideState{store: c.Store, log: log}, Classifier: c.Classifier, LLMHint: c.LLMHint, Routes: c.Routes}},
		{base(architect.Name), consult.Wrap(architect.Name, arch, responder)},
		{withOpts(base(orchestrator.Name), func(o *agents.Options) { o.PerSession = 1; o.Concurrency = 4 }),
			&orchestrator.Orchestrator{Store: c.Store, Log: log, Catalog: c.Catalog()}},
		{withOpts(base(archivalist.Name), func(o *agents.Options) { o.Filters = archivalist.Filters() }),
			consult.Wrap(archivalist.Name, &archivalist.Archivalist{Store: c.Store}, responder)},
		{base(librarian.Name), consult.Wrap(librarian.Name, lib, responder)},
		{base(academic.Name), consult.Wrap(academic.Name, &academic.Academic{Store: c.Store, DefaultWorkDir: c.DefaultWorkDir, Embedder: c.Embedder}, responder)},
		{withOpts(base(pipeline.Name), func(o *agents.Options) { o.PerSession = 1; o.Concurrency = 4 }),
			&pipeline.Agent{Store: c.Store, Records: c.records(), Executors: executors, MaxLoops: c.PipelineLoops, MaxHandoffs: c.PipelineHandoffs, WorktreeDir: c.worktreeDir()}},
	}
	judges := map[string]worker.Judge{"engineer": worker.ByExit, "inspector": worker.ByFindings, "tester": worker.ByTests}
	for _, name := range toolAgents {
		w := &worker.Worker{Agent: name, Executors: executors, Records: c.records(), Judge: judges[name], Prompter: c.Prompter, LLMHint: c.LLMHint, Plans: c.Store}
		if name == "tester" {
			w.Prepare, w.Observe = worker.GoTestJSON, worker.CountTests
		}
		all = append(all, agent{withOpts(base(name), func(o *agents.Options) {
			o.Concurrency = c.Concurrency
			o.SkipCancelled = true
			o.OnDeadLetter = nodeDeadLettered
		}), consult.Wrap(name, w, responder)})
	}
	if c.Agents == nil {
		return all
	}
	return slices.DeleteFunc(all, func(a agent) bool { return !slices.Contains(c.Agents, a.opts.Agent) })
}

// nodeDeadLettered tells the Orchestrator that a node's dispatch was given up
// on (a permanent error, or every delivery failed), so the DAG does not wait
// for it forever: a task_failed that is not retried. It has the id of the
// outcome the worker would have reported, so if that was appended after all,
// this one is dropped as its duplicate.
func nodeDeadLettered(d *agents.Delivery, reason string) ([]*schemas.Envelope, error) {
	if d.Env.Type != schemas.TypeTaskDispatch {
		return nil, nil
	}
	node, err := schemas.PayloadAs[schemas.TaskDispatch](d.Env)
	if err != nil {
		return nil, nil // nothing to report it against
	}
	failed, err := d.Derive(schemas.TypeTaskFailed, orchestrator.Name, "outcome", schemas.TaskFailed{
		DAGID: node.DAGID, NodeID: node.NodeID, Attempt: node.Attempt,
		Error: "the dispatch was dead-lettered (sylk dlq ls): " + reason,
	})
	if err != nil {
		return nil, err
	}
	return []*schemas.Envelope{failed}, nil
}

func (c *Config) worktreeDir() string {
	if c.WorktreeDir != "" {
		return c.WorktreeDir
	}
	return filepath.Join(os.TempDir(), "sylk-variants")
}

func withOpts(o agents.Options, f func(*agents.Options)) agents.Options {
	f(&o)
	return o
}

// Names are the agents Run starts with cfg.
func (c *Config) Names() []string {
	// On a copy: building the agents fills in the LLM tier's defaults, which
	// Run must build itself, after its own defaults (the tool permissions).
	cp := *c
	var out []string
	for _, a := range cp.agents(nil) {
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
	if cfg.Tools.Pool == nil {
		// One pool bounds the tool processes of every session and work
		// directory, not one per executor.
		size := tools.DefaultMaxProcesses()
		pool, err := tools.NewPool(size, tools.ReservedFor(size))
		if err != nil {
			return err
		}
		cfg.Tools.Pool = pool
	}
	hp, err := cfg.Pipeline()
	if err != nil {
		return err
	}
	if cfg.OnHooks != nil {
		cfg.OnHooks(hp)
	}
	log := events.New(cfg.JetStream)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, a := range cfg.agents(hp) {
		runner, err := agents.NewRunner(cfg.JetStream, a.handler, a.opts)
		if err != nil {
			return err
		}
		if cfg.OnRunner != nil {
			cfg.OnRunner(runner)
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
