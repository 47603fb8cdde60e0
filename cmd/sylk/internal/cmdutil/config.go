package cmdutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Config is Sylk's configuration. Layers, each over the one before: built-in
// defaults, the user's config ($XDG_CONFIG_HOME/sylk/config.yaml), the project's
// .sylk/config.yaml (found from the working directory up), SYLK_* variables,
// then command-line flags. Unknown keys are errors.
type Config struct {
	Data    string `yaml:"data"`
	NATSURL string `yaml:"nats_url"`
	Listen  string `yaml:"listen"`
	Sync    string `yaml:"sync"`
	// HTTP is `sylk serve`'s HTTP listener (/metrics), HOST:PORT; none by
	// default.
	HTTP     string `yaml:"http"`
	LogLevel string `yaml:"log_level"`
	// AckWait is how long an agent may hold a message without a sign of life
	// before it is given to another process (a crashed agent's work is retried
	// after it): a Go duration.
	AckWait string `yaml:"ack_wait"`
	// Creds (a NATS .creds file), Token, or User and Password authenticate
	// to the external server of NATSURL. The embedded server's own
	// credentials are found through server.json.
	Creds    string `yaml:"creds"`
	Token    string `yaml:"token"`
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Cluster makes `sylk serve`'s embedded server a member of a cluster
	// (name, listen, routes), and Replicas is how many copies of the streams
	// it keeps; see `sylk serve --help`.
	Cluster  broker.Cluster `yaml:"cluster"`
	Replicas int            `yaml:"replicas"`
	// Roles are what `sylk serve` runs (broker, projections, agents), and
	// Agents which agents it runs; empty: all.
	Roles  []string `yaml:"roles"`
	Agents []string `yaml:"agents"`
	// LLM is the LLM tier: an OpenAI-compatible endpoint, the model (per
	// agent if wanted), token budgets and the call policy (llm.Config: base_url,
	// model, agent_models, budgets {global, session, task}, prices,
	// max_context_tokens, max_tokens, no_stream, timeout, retries,
	// concurrency...). The API key comes only from the environment
	// (SYLK_LLM_API_KEY or OPENAI_API_KEY), never from a file.
	LLM llm.Config `yaml:"llm"`
	// Permissions maps an agent to the tools it may use, over the defaults.
	Permissions map[string][]string `yaml:"permissions"`
	// Commands maps an agent to the commands it runs without asking (words
	// of the command's start: "go test"). Another command is allowed when
	// it is on the safe list or a remembered answer covers it; otherwise it
	// waits for the user's `sylk permit allow|deny`. An agent with no entry
	// asks about every command off the safe list.
	Commands map[string][]string `yaml:"commands"`
	// Hooks are the user hooks (hooks.Config: name, point, trigger, agents,
	// priority, command, timeout, fail); a file that has the key replaces
	// the list of the files before it.
	Hooks []hooks.Config `yaml:"hooks"`
	// Routes override entries of the Guide's routing table (a message type to
	// the agent that owns it), Prompts the system prompt of a prompt node's
	// agent (engineer, inspector, tester). Check such a change against
	// recorded work first: sylk replay --reexecute --all.
	Routes  map[schemas.Type]string `yaml:"routes"`
	Prompts map[string]string       `yaml:"prompts"`
	// Stream is the event stream's disk quota. A change takes effect at the
	// next start.
	Stream StreamConfig `yaml:"stream"`
	// Tools are the limits of tool processes. A change of memory_limit takes
	// effect at the next start, one of max_processes or user_reserved at once.
	Tools ToolsConfig `yaml:"tools"`
	// Pipelines are the limits of single-worker pipelines. A change takes
	// effect at the next start, for the pipelines that start then.
	Pipelines PipelinesConfig `yaml:"pipelines"`
}

// PipelinesConfig is the pipelines section of the config file; 0 is the
// default.
type PipelinesConfig struct {
	// MaxLoops is how many implement-validate loops a pipeline makes before
	// the user decides (schemas.DefaultPipelineLoops).
	MaxLoops int `yaml:"max_loops"`
	// MaxHandoffs caps a chain of Engineer handoffs; at the cap the Engineer
	// summarises and compacts instead (schemas.DefaultPipelineHandoffs).
	MaxHandoffs int `yaml:"max_handoffs"`
}

// WithDefaults is p with the defaults in place of its unset limits.
func (p PipelinesConfig) WithDefaults() PipelinesConfig {
	if p.MaxLoops == 0 {
		p.MaxLoops = schemas.DefaultPipelineLoops
	}
	if p.MaxHandoffs == 0 {
		p.MaxHandoffs = schemas.DefaultPipelineHandoffs
	}
	return p
}

// ToolsConfig is the tools section of the config file.
type ToolsConfig struct {
	// MemoryLimit caps each tool process's memory (tools.Options
	// MemoryLimit): "2GiB", "512MiB", a number of bytes, or "unlimited".
	// Default half of the machine's memory.
	MemoryLimit tools.ByteSize `yaml:"memory_limit"`
	// MaxProcesses bounds the tool processes a server runs at once, over
	// all its sessions. 0: tools.DefaultMaxProcesses() (2 per CPU).
	MaxProcesses int `yaml:"max_processes"`
	// UserReserved is how many of them are kept for the user's own requests
	// (scheduled and background work may not take them). 0: 20% of
	// MaxProcesses, at least one (tools.ReservedFor).
	UserReserved int `yaml:"user_reserved"`
}

// StreamConfig is the stream section of the config file.
type StreamConfig struct {
	// MaxBytes is the event stream's disk quota ("20GiB"; none by default):
	// the server warns at 80% and 90% (stream_quota events), pauses
	// scheduled work at 90% until it is back under 80%, and refuses new
	// events beyond it.
	MaxBytes tools.ByteSize `yaml:"max_bytes"`
}

// minStreamQuota is the smallest stream quota accepted: below it a server
// could not hold its own start.
const minStreamQuota = 1 << 20

// PoolLimits are the tool process pool's size and user reserve, defaults
// applied.
func (t ToolsConfig) PoolLimits() (size, reserved int) {
	size = t.MaxProcesses
	if size == 0 {
		size = tools.DefaultMaxProcesses()
	}
	reserved = t.UserReserved
	if reserved == 0 {
		reserved = tools.ReservedFor(size)
	}
	return size, reserved
}

// configFiles returns the config files that exist, lowest precedence first.
func configFiles() []string {
	var files []string
	if userDir := userConfigDir(); userDir != "" {
		files = append(files, filepath.Join(userDir, "sylk", "config.yaml"))
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, ".sylk", "config.yaml")
			if _, err := os.Stat(p); err == nil {
				files = append(files, p)
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return files
}

// ProjectDir is the project the working directory is in: the nearest
// directory, from the working directory up, that holds a .sylk directory,
// else the working directory.
func ProjectDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, ".sylk")); err == nil && fi.IsDir() {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// loadConfig reads the config files, then the SYLK_* variables (the LLM's
// with llm.Config.FromEnv, which also reads OPENAI_API_KEY and
// OPENAI_BASE_URL). Every file is read, so that problems lists what is wrong
// in each; origins says which layer set each key.
func loadConfig() (cfg Config, origins Origins, files []string, problems []error) {
	origins = Origins{}
	seen := flatten(cfg)
	for _, path := range configFiles() {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		files = append(files, path)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		next := cfg
		if err := yaml.NewDecoder(bytes.NewReader(b), yaml.DisallowUnknownField()).Decode(&next); err != nil && !errors.Is(err, io.EOF) {
			problems = append(problems, fmt.Errorf("config %s: %s", path, yaml.FormatError(err, false, true)))
			// Read it again past unknown keys, so that the checks of its
			// values report their problems too.
			next = cfg
			if yaml.NewDecoder(bytes.NewReader(b)).Decode(&next) != nil {
				continue
			}
		}
		cfg = next
		seen = origins.mark(seen, cfg, path)
	}
	for env, field := range map[string]*string{
		"SYLK_DATA": &cfg.Data, "SYLK_NATS_URL": &cfg.NATSURL, "SYLK_LISTEN": &cfg.Listen, "SYLK_HTTP": &cfg.HTTP,
		"SYLK_SYNC": &cfg.Sync, "SYLK_LOG_LEVEL": &cfg.LogLevel, "SYLK_TOKEN": &cfg.Token, "SYLK_ACK_WAIT": &cfg.AckWait,
		"SYLK_CREDS": &cfg.Creds,
	} {
		if v, ok := os.LookupEnv(env); ok {
			*field = v
		}
	}
	if err := cfg.LLM.FromEnv(os.LookupEnv); err != nil {
		problems = append(problems, err)
	}
	origins.mark(seen, cfg, SourceEnv)
	return cfg, origins, files, problems
}

// check lists every problem of cfg that its types do not catch.
func check(cfg Config) []error {
	var problems []error
	if cfg.AckWait != "" {
		if d, err := time.ParseDuration(cfg.AckWait); err != nil || d <= 0 {
			problems = append(problems, fmt.Errorf("ack_wait %q: want a positive duration like 30s", cfg.AckWait))
		}
	}
	if _, err := logLevel(cfg.LogLevel); err != nil {
		problems = append(problems, err)
	}
	if cfg.Creds != "" && cfg.NATSURL == "" {
		// Ignored, the command would act with the server's own (admin)
		// credentials while its user believes it acts with these.
		problems = append(problems, fmt.Errorf("creds %q: a credentials file is for --nats-url (an external server or the URL of a sylk server); without it the server of the data directory is reached with the credentials its server.json names", cfg.Creds))
	}
	if err := guide.CheckRoutes(cfg.Routes); err != nil {
		problems = append(problems, fmt.Errorf("config: %w", err))
	}
	for agent := range cfg.Prompts {
		if !slices.Contains(runtime.ToolAgents(), agent) {
			problems = append(problems, fmt.Errorf("config: prompts: %q: want one of the agents that run prompt nodes, %s", agent, strings.Join(runtime.ToolAgents(), ", ")))
		}
	}
	if _, err := hooks.FromConfig(cfg.Hooks, nil); err != nil {
		problems = append(problems, fmt.Errorf("config: %w", err))
	}
	if err := tools.CheckMemoryLimit(cfg.Tools.MemoryLimit); err != nil {
		problems = append(problems, fmt.Errorf("config: tools.%w", err))
	}
	if q := cfg.Stream.MaxBytes; q != 0 && q != -1 && q < minStreamQuota {
		problems = append(problems, fmt.Errorf("config: stream.max_bytes %d is below %s: give a size such as 20GiB, or unlimited", int64(q), tools.ByteSize(minStreamQuota)))
	}
	defaults := PipelinesConfig{}.WithDefaults()
	for _, l := range []struct {
		key     string
		n, dflt int
	}{{"max_loops", cfg.Pipelines.MaxLoops, defaults.MaxLoops}, {"max_handoffs", cfg.Pipelines.MaxHandoffs, defaults.MaxHandoffs}} {
		if l.n < 0 {
			problems = append(problems, fmt.Errorf("config: pipelines.%s %d: want 1 or more (0 or unset: the default, %d)", l.key, l.n, l.dflt))
		}
	}
	if err := tools.CheckPoolLimits(cfg.Tools.PoolLimits()); err != nil {
		problems = append(problems, fmt.Errorf("config: tools.%w", err))
	}
	return problems
}
