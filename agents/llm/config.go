package llm

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults.
const (
	DefaultBaseURL          = "https://api.openai.com/v1"
	DefaultMaxContextTokens = 32768
	DefaultReserveTokens    = 4096
	DefaultTimeout          = 5 * time.Minute
	DefaultIdleTimeout      = 90 * time.Second
	DefaultRetries          = 3
	DefaultRateLimitRetries = 6
	DefaultBackoff          = 500 * time.Millisecond
	DefaultMaxBackoff       = 20 * time.Second
	// DefaultRateLimitBackoff doubles per 429 without a Retry-After, up to
	// DefaultMaxRateLimitBackoff (seed L4038-4039).
	DefaultRateLimitBackoff    = time.Second
	DefaultMaxRateLimitBackoff = 5 * time.Minute
	DefaultConcurrency         = 4
)

// Hint tells a user how to configure an LLM.
const Hint = "set --llm-model (and --llm-base-url for an endpoint other than OpenAI: Ollama, vLLM, llama.cpp, OpenRouter), " +
	"or SYLK_LLM_MODEL and SYLK_LLM_BASE_URL, with the key in OPENAI_API_KEY or SYLK_LLM_API_KEY"

// Errors of configuration.
var (
	// ErrNotConfigured: no model is set, so there is no LLM tier.
	ErrNotConfigured = errors.New("no LLM is configured")
	// ErrInvalidConfig is wrapped by every Config.Validate failure.
	ErrInvalidConfig = errors.New("invalid LLM configuration")
)

// Config configures the LLM tier: one OpenAI-compatible endpoint, a model
// (per agent if wanted), token budgets and the call policy.
type Config struct {
	// BaseURL of the API, ending before /chat/completions:
	// https://api.openai.com/v1 (default), http://localhost:11434/v1
	// (Ollama), http://localhost:8000/v1 (vLLM), https://openrouter.ai/api/v1.
	BaseURL string `yaml:"base_url" json:"base_url,omitempty"`
	// Model is the default model; no model means no LLM tier.
	Model string `yaml:"model" json:"model,omitempty"`
	// EmbeddingModel is the model of the /embeddings endpoint (same base
	// URL and key); none means no vectors: search is lexical only.
	EmbeddingModel string `yaml:"embedding_model" json:"embedding_model,omitempty"`
	// EmbeddingDims asks for vectors of this many dimensions (0: the
	// model's own; text-embedding-3 models can shorten theirs).
	EmbeddingDims int `yaml:"embedding_dims" json:"embedding_dims,omitempty"`
	// AgentModels chooses another model for some agents ("architect": "gpt-4.1").
	AgentModels map[string]string `yaml:"agent_models" json:"agent_models,omitempty"`
	// APIKey is sent as a bearer token; endpoints on this machine need none.
	// It is never serialised.
	APIKey string `yaml:"-" json:"-"`
	// Provider names the endpoint in usage records (default: from BaseURL's
	// host, "openai" for api.openai.com).
	Provider string `yaml:"provider" json:"provider,omitempty"`

	// Budgets in tokens, checked before every call.
	Budgets Budgets `yaml:"budgets" json:"budgets"`
	// Prices per model, for the cost in usage records (optional).
	Prices map[string]Price `yaml:"prices" json:"prices,omitempty"`

	// MaxContextTokens is the model's context window; ReserveTokens of it
	// are kept for the answer. Longer conversations are summarised.
	MaxContextTokens int `yaml:"max_context_tokens" json:"max_context_tokens,omitempty"`
	ReserveTokens    int `yaml:"reserve_tokens" json:"reserve_tokens,omitempty"`
	// MaxTokens caps each answer (0: the endpoint's default).
	MaxTokens int `yaml:"max_tokens" json:"max_tokens,omitempty"`

	// NoStream asks for whole answers instead of streamed ones; streamed
	// tokens are published live for `sylk tail --live`.
	NoStream bool `yaml:"no_stream" json:"no_stream,omitempty"`
	// Timeout bounds one HTTP attempt; IdleTimeout the silence within a
	// stream (the watchdog).
	Timeout     time.Duration `yaml:"timeout" json:"timeout,omitempty"`
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout,omitempty"`
	// Retries of a call that failed for a transient reason (5xx, network,
	// timeout, malformed answer) before the message is handed back to the
	// runner; RateLimitRetries of a call answered 429.
	Retries          int           `yaml:"retries" json:"retries,omitempty"`
	RateLimitRetries int           `yaml:"rate_limit_retries" json:"rate_limit_retries,omitempty"`
	Backoff          time.Duration `yaml:"backoff" json:"backoff,omitempty"`
	MaxBackoff       time.Duration `yaml:"max_backoff" json:"max_backoff,omitempty"`
	// RateLimitBackoff is the first wait after a 429 without Retry-After,
	// doubled each time up to MaxRateLimitBackoff. A Retry-After is
	// honoured as given.
	RateLimitBackoff    time.Duration `yaml:"rate_limit_backoff" json:"rate_limit_backoff,omitempty"`
	MaxRateLimitBackoff time.Duration `yaml:"max_rate_limit_backoff" json:"max_rate_limit_backoff,omitempty"`
	// Concurrency is how many calls this process has in flight; the others
	// wait in priority order (user work first).
	Concurrency int `yaml:"concurrency" json:"concurrency,omitempty"`
}

// Budgets are token limits (prompt plus completion) over what the usage
// records say was spent; 0 means no limit. A call whose estimate would take a
// scope past its limit is refused before it is made.
type Budgets struct {
	Global  int64 `yaml:"global" json:"global,omitempty"`
	Session int64 `yaml:"session" json:"session,omitempty"`
	// Task is per DAG node.
	Task int64 `yaml:"task" json:"task,omitempty"`
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input" json:"input"`
	Output float64 `yaml:"output" json:"output"`
}

// Configured reports whether an LLM tier is configured: a model is set.
func (c *Config) Configured() bool { return c.Model != "" }

// FromEnv overrides c with the environment: SYLK_LLM_BASE_URL (or
// OPENAI_BASE_URL), SYLK_LLM_MODEL, SYLK_LLM_API_KEY (or OPENAI_API_KEY),
// SYLK_LLM_EMBEDDING_MODEL, SYLK_LLM_EMBEDDING_DIMS, SYLK_LLM_BUDGET_GLOBAL,
// SYLK_LLM_BUDGET_SESSION, SYLK_LLM_BUDGET_TASK.
// Apply it after the config files and before the flags. lookup is
// os.LookupEnv.
func (c *Config) FromEnv(lookup func(string) (string, bool)) error {
	first := func(names ...string) (string, bool) {
		for _, n := range names {
			if v, ok := lookup(n); ok && v != "" {
				return v, true
			}
		}
		return "", false
	}
	if v, ok := first("SYLK_LLM_BASE_URL", "OPENAI_BASE_URL"); ok {
		c.BaseURL = v
	}
	if v, ok := first("SYLK_LLM_MODEL"); ok {
		c.Model = v
	}
	if v, ok := first("SYLK_LLM_EMBEDDING_MODEL"); ok {
		c.EmbeddingModel = v
	}
	if v, ok := first("SYLK_LLM_EMBEDDING_DIMS"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: SYLK_LLM_EMBEDDING_DIMS=%q is not a number of dimensions", ErrInvalidConfig, v)
		}
		c.EmbeddingDims = n
	}
	if v, ok := first("SYLK_LLM_API_KEY", "OPENAI_API_KEY"); ok {
		c.APIKey = v
	}
	for name, dst := range map[string]*int64{
		"SYLK_LLM_BUDGET_GLOBAL": &c.Budgets.Global, "SYLK_LLM_BUDGET_SESSION": &c.Budgets.Session, "SYLK_LLM_BUDGET_TASK": &c.Budgets.Task,
	} {
		if v, ok := first(name); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: %s=%q is not a number of tokens", ErrInvalidConfig, name, v)
			}
			*dst = n
		}
	}
	return nil
}

// EnsureDefaults fills unset fields and returns c.
func (c *Config) EnsureDefaults() *Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Provider == "" {
		c.Provider = providerOf(c.BaseURL)
	}
	if c.MaxContextTokens <= 0 {
		c.MaxContextTokens = DefaultMaxContextTokens
	}
	if c.ReserveTokens <= 0 {
		c.ReserveTokens = min(DefaultReserveTokens, c.MaxContextTokens/4)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	if c.RateLimitRetries == 0 {
		c.RateLimitRetries = DefaultRateLimitRetries
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.RateLimitBackoff <= 0 {
		c.RateLimitBackoff = DefaultRateLimitBackoff
	}
	if c.MaxRateLimitBackoff <= 0 {
		c.MaxRateLimitBackoff = DefaultMaxRateLimitBackoff
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	return c
}

// Validate checks c; a Config without a model is ErrNotConfigured.
func (c *Config) Validate() error {
	if !c.Configured() {
		return fmt.Errorf("%w: %s", ErrNotConfigured, Hint)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("base URL %q: want http(s)://host[:port]/path, e.g. http://localhost:11434/v1", c.BaseURL)
	}
	if u.Host == "api.openai.com" && c.APIKey == "" {
		return bad("api.openai.com needs an API key: set OPENAI_API_KEY (or SYLK_LLM_API_KEY)")
	}
	for agent, m := range c.AgentModels {
		if m == "" {
			return bad("agent_models.%s is empty", agent)
		}
	}
	switch {
	case c.Budgets.Global < 0 || c.Budgets.Session < 0 || c.Budgets.Task < 0:
		return bad("budgets must be 0 (no limit) or a positive number of tokens: %+v", c.Budgets)
	case c.ReserveTokens >= c.MaxContextTokens:
		return bad("reserve_tokens %d must be below max_context_tokens %d", c.ReserveTokens, c.MaxContextTokens)
	case c.MaxTokens < 0:
		return bad("max_tokens %d is negative", c.MaxTokens)
	case c.Retries < 0 || c.RateLimitRetries < 0:
		return bad("retries must not be negative")
	}
	for m, p := range c.Prices {
		if p.Input < 0 || p.Output < 0 {
			return bad("prices.%s: negative price", m)
		}
	}
	return nil
}

// ModelFor is the model agent uses.
func (c *Config) ModelFor(agent string) string {
	if m, ok := c.AgentModels[agent]; ok {
		return m
	}
	return c.Model
}

// String describes c without its key.
func (c Config) String() string {
	key := "no key"
	if c.APIKey != "" {
		key = "key set"
	}
	return fmt.Sprintf("%s model %s (%s)", c.BaseURL, c.Model, key)
}

func providerOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "openai-compatible"
	}
	switch h := u.Hostname(); {
	case h == "api.openai.com":
		return "openai"
	case strings.HasSuffix(h, "openrouter.ai"):
		return "openrouter"
	default:
		return h
	}
}

func (c *Config) cost(model string, u usageCounts) float64 {
	p, ok := c.Prices[model]
	if !ok {
		return 0
	}
	return (float64(u.prompt)*p.Input + float64(u.completion)*p.Output) / 1e6
}

type usageCounts struct{ prompt, completion int }
