// Package cmdutil holds what sylk's commands share: the Factory that builds
// their dependencies (configuration, broker, server, state reader), the
// IOStreams they print on, the configuration, and the errors that set the
// exit code.
package cmdutil

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/agents/skills"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/server"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/tools"
)

// Factory builds a command's dependencies lazily, so `sylk schema` never opens a
// store and tests can swap any of them.
type Factory struct {
	IO  *IOStreams
	Cfg Config
	Now func() time.Time

	// Origins says where each value of Cfg came from; ConfigFiles are the
	// config files read, lowest precedence first.
	Origins     Origins
	ConfigFiles []string

	flagData, flagNATSURL, flagLogLevel, flagCreds string
	flagLLM                                        llmFlags
	// cmd is the command configured, whose flags a reload applies again.
	cmd   *cobra.Command
	level slog.LevelVar

	broker *broker.Broker
	server *server.Server
}

// NewFactory is a factory printing on io.
func NewFactory(io *IOStreams) *Factory {
	return &Factory{IO: io, Now: time.Now}
}

// BindGlobalFlags adds the global flags to root.
func (f *Factory) BindGlobalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&f.flagData, "data", "", "data directory (default $SYLK_DATA, else $XDG_DATA_HOME/sylk)")
	pf.StringVar(&f.flagNATSURL, "nats-url", "", "use the external NATS server at this URL instead of an embedded one")
	pf.StringVar(&f.flagCreds, "creds", "", "NATS credentials file for --nats-url (default $SYLK_CREDS; sylk user add writes one)")
	pf.StringVar(&f.flagLogLevel, "log-level", "", "log level on stderr: debug, info, warn, error (default warn; info for serve)")
	f.flagLLM.bind(root)
}

// llmFlags are the global flags of the LLM tier; the API key is read from the
// environment only, so it never shows in a process list.
type llmFlags struct {
	baseURL, model              string
	budgetGlobal, budgetSession int64
	budgetTask                  int64
	noStream                    bool
}

func (l *llmFlags) bind(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&l.baseURL, "llm-base-url", "", "OpenAI-compatible API, up to /chat/completions (default $SYLK_LLM_BASE_URL, else "+llm.DefaultBaseURL+")")
	pf.StringVar(&l.model, "llm-model", "", "the model the agents use (default $SYLK_LLM_MODEL); none means no LLM")
	pf.Int64Var(&l.budgetGlobal, "llm-budget-global", 0, "token limit over every session (0: none; $SYLK_LLM_BUDGET_GLOBAL)")
	pf.Int64Var(&l.budgetSession, "llm-budget-session", 0, "token limit per session (0: none; $SYLK_LLM_BUDGET_SESSION)")
	pf.Int64Var(&l.budgetTask, "llm-budget-task", 0, "token limit per DAG node (0: none; $SYLK_LLM_BUDGET_TASK)")
	pf.BoolVar(&l.noStream, "llm-no-stream", false, "ask for whole answers instead of streamed ones (nothing for 'tail --live')")
}

// apply sets the flags given on the command line over cfg.
func (l *llmFlags) apply(flags interface{ Changed(string) bool }, cfg *llm.Config) error {
	if flags.Changed("llm-base-url") {
		cfg.BaseURL = l.baseURL
	}
	if flags.Changed("llm-model") {
		cfg.Model = l.model
	}
	for name, v := range map[string]struct {
		flag int64
		dst  *int64
	}{
		"llm-budget-global": {l.budgetGlobal, &cfg.Budgets.Global}, "llm-budget-session": {l.budgetSession, &cfg.Budgets.Session},
		"llm-budget-task": {l.budgetTask, &cfg.Budgets.Task},
	} {
		if !flags.Changed(name) {
			continue
		}
		if v.flag < 0 {
			return Usagef("--%s %d: want a number of tokens, or 0 for no limit", name, v.flag)
		}
		*v.dst = v.flag
	}
	if flags.Changed("llm-no-stream") {
		cfg.NoStream = l.noStream
	}
	return nil
}

// LLMConfig is the LLM configuration, defaults applied and checked. Without
// a model the error wraps llm.ErrNotConfigured and says how to set one; an
// invalid one is a usage error.
func (f *Factory) LLMConfig() (llm.Config, error) {
	c := f.Cfg.LLM
	c.EnsureDefaults()
	err := c.Validate()
	if err != nil && !errors.Is(err, llm.ErrNotConfigured) {
		return c, UsageError{Err: err}
	}
	return c, err
}

// Configure layers config files, SYLK_* variables and flags into f.Cfg, and sets
// up logging. Every problem found is reported at once.
func (f *Factory) Configure(cmd *cobra.Command) error {
	cfg, origins, files, problems := f.readConfig(cmd)
	if len(problems) > 0 {
		return UsageError{Err: errors.Join(problems...)}
	}
	level, _ := logLevel(cfg.LogLevel) // checked
	f.level.Set(level)
	slog.SetDefault(slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: &f.level})))
	f.Cfg, f.Origins, f.ConfigFiles, f.cmd = cfg, origins, files, cmd
	return nil
}

// readConfig layers the config files, the SYLK_* variables, cmd's flags and
// the defaults that depend on the command, and checks the result.
func (f *Factory) readConfig(cmd *cobra.Command) (Config, Origins, []string, []error) {
	cfg, origins, files, problems := loadConfig()
	seen := flatten(cfg)
	flags := cmd.Flags()
	if flags.Changed("data") {
		cfg.Data = f.flagData
	}
	if flags.Changed("nats-url") {
		cfg.NATSURL = f.flagNATSURL
	}
	if flags.Changed("log-level") {
		cfg.LogLevel = f.flagLogLevel
	}
	if flags.Changed("creds") {
		cfg.Creds = f.flagCreds
	}
	if err := f.flagLLM.apply(flags, &cfg.LLM); err != nil {
		problems = append(problems, err)
	}
	origins.mark(seen, cfg, SourceFlag)
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
		if cmd.Name() == "serve" {
			cfg.LogLevel = "info"
		}
	}
	return cfg, origins, files, append(problems, check(cfg)...)
}

// SkillsCache is the skills discovery cache, a file in the data directory
// (in memory only without one).
func (f *Factory) SkillsCache() *skills.Cache {
	if dir := f.BrokerOptions().DataDir; dir != "" {
		return skills.OpenCache(filepath.Join(dir, skills.CacheFile))
	}
	return skills.OpenCache("")
}

// BrokerOptions are the broker options the configuration asks for.
func (f *Factory) BrokerOptions() broker.Options {
	o := broker.Options{DataDir: f.Cfg.Data, NATSURL: f.Cfg.NATSURL, Listen: f.Cfg.Listen, Sync: f.Cfg.Sync, Name: "sylk-cli"}
	if q := f.Cfg.Stream.MaxBytes; q > 0 {
		o.MaxBytes = int64(q)
	}
	if o.NATSURL != "" {
		// The embedded server's credentials come from server.json.
		o.CredsFile, o.Token, o.User, o.Password = f.Cfg.Creds, f.Cfg.Token, f.Cfg.User, f.Cfg.Password
	}
	o.EnsureDefaults()
	return o
}

// Broker connects to the server that owns the data directory. With none
// running, it starts an embedded one for this command only, off the network.
func (f *Factory) Broker(ctx context.Context) (*broker.Broker, error) {
	if f.broker != nil {
		return f.broker, nil
	}
	opts := f.BrokerOptions()
	b, err := broker.Connect(ctx, opts)
	if errors.Is(err, broker.ErrNoServer) {
		opts.Listen = broker.ListenNone
		b, err = broker.Start(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	f.broker = b
	return b, nil
}

// Server connects to the server that owns the data directory, or, with none
// running, starts one in this process with the projections and the agents, on
// a free loopback port, for the command's duration (started = true). Either
// way the returned broker is the connection to use.
func (f *Factory) Server(ctx context.Context) (b *broker.Broker, started bool, err error) {
	if f.broker != nil {
		return f.broker, f.server != nil, nil
	}
	opts := f.BrokerOptions()
	b, err = broker.Connect(ctx, opts)
	if err == nil {
		f.broker = b
		return b, false, nil
	}
	if !errors.Is(err, broker.ErrNoServer) {
		return nil, false, err
	}
	opts.Listen = "127.0.0.1:0"
	opts.Name = "sylk-embedded"
	s, err := f.StartServer(ctx, opts)
	if err != nil {
		return nil, false, err
	}
	f.server, f.broker = s, s.Broker()
	return s.Broker(), true, nil
}

// Log is the event log on Broker.
func (f *Factory) Log(ctx context.Context) (*events.Log, error) {
	b, err := f.Broker(ctx)
	if err != nil {
		return nil, err
	}
	return events.New(b.JetStream()), nil
}

// StartServer starts the server runtime on opts with the configured agents
// and LLM (the server `sylk serve` runs, and Server's embedded one).
func (f *Factory) StartServer(ctx context.Context, opts broker.Options) (*server.Server, error) {
	return server.Start(ctx, server.Options{Broker: opts, Runtime: f.RuntimeConfig(), LLM: f.LLMConfig})
}

// settleWithin bounds how long a command that ran the agents itself waits for
// them to finish what the command's work set off.
const settleWithin = 5 * time.Second

// Close releases what the factory opened.
func (f *Factory) Close(ctx context.Context) {
	if f.server != nil {
		f.server.Settle(ctx, settleWithin)
		if err := f.server.Stop(); err != nil {
			slog.Warn("stopping the embedded server", "err", err)
		}
		f.server, f.broker = nil, nil
		return
	}
	if f.broker != nil {
		if err := f.broker.Close(); err != nil {
			slog.Warn("closing the broker", "err", err)
		}
		f.broker = nil
	}
}

func logLevel(name string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(name))
	if err != nil {
		return l, Usagef("--log-level %q: use debug, info, warn or error", name)
	}
	return l, nil
}

// RuntimeConfig is the agent runtime's configuration: tools run in the
// submitting directory, with the configured permissions over the defaults,
// in a new process pool of the configured limits.
// The LLM client is made by the server's agents component, which lives as
// long as the agents.
func (f *Factory) RuntimeConfig() runtime.Config {
	wd, _ := os.Getwd()
	policy := tools.DefaultPolicy()
	for agent, allowed := range f.Cfg.Permissions {
		policy.Agents[agent] = tools.AgentPolicy{Tools: allowed}
	}
	for agent, cmds := range f.Cfg.Commands {
		policy = policy.WithCommands(agent, cmds...)
	}
	ackWait, _ := time.ParseDuration(f.Cfg.AckWait)    // checked in configure
	pool, _ := tools.NewPool(f.Cfg.Tools.PoolLimits()) // checked in configure
	cfg := runtime.Config{
		Tools:            tools.Options{Permissions: policy, MemoryLimit: f.Cfg.Tools.MemoryLimit, Pool: pool},
		DefaultWorkDir:   wd,
		Hooks:            f.Cfg.Hooks,
		Routes:           f.Cfg.Routes,
		Prompts:          f.Cfg.Prompts,
		PipelineLoops:    f.Cfg.Pipelines.MaxLoops,
		PipelineHandoffs: f.Cfg.Pipelines.MaxHandoffs,
		AckWait:          ackWait,
		GroupCommit:      f.Cfg.Sync != broker.SyncInterval,
		Logger:           slog.Default(),
		LLMHint:          llm.Hint,
		Skills:           skills.Config{UserDirs: skills.UserDirs(), Cache: f.SkillsCache()},
	}
	if f.Cfg.LLM.Configured() {
		// Plans with prompt nodes validate before the client exists.
		cfg.PromptAgents = runtime.ToolAgents()
	}
	return cfg
}
