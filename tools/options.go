package tools

import (
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"time"
)

// Defaults. The timeouts and the kill sequence follow the seed architecture
// (tools.* in its configuration schema); the output bounds follow its
// output.* section.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultExtendOnOutput = 30 * time.Second
	DefaultMaxTimeout     = 30 * time.Minute

	DefaultSIGINTGrace  = 5 * time.Second
	DefaultSIGTERMGrace = 3 * time.Second
	DefaultKillWait     = 2 * time.Second

	DefaultMaxOutputBytes = 1 << 20
	DefaultHeadLines      = 50
	DefaultTailLines      = 100
	DefaultImportantLines = 100

	DefaultMaxReadBytes     = 256 << 10
	DefaultReadLines        = 2000
	DefaultMaxWriteBytes    = 8 << 20
	DefaultMaxEntries       = 1000
	DefaultMaxMatches       = 200
	DefaultMaxGrepFileBytes = 4 << 20

	DefaultMinSecretLen = 8
	DefaultRedaction    = "[REDACTED]"

	// minLineBytes is the smallest per-line budget Validate accepts.
	minLineBytes = 256
	// minConfiguredSecretLen is the shortest literal secret value accepted
	// in SecretOptions.Values: shorter ones would redact ordinary text.
	minConfiguredSecretLen = 4
)

// DefaultCommandTimeouts returns the seed's per-command base timeouts, keyed
// by the leading words of a command line.
func DefaultCommandTimeouts() map[string]time.Duration {
	return map[string]time.Duration{
		"go build":      10 * time.Minute,
		"go test":       5 * time.Minute,
		"go vet":        5 * time.Minute,
		"npm install":   5 * time.Minute,
		"npm ci":        5 * time.Minute,
		"npm run build": 10 * time.Minute,
		"cargo build":   10 * time.Minute,
		"cargo test":    5 * time.Minute,
		"pytest":        5 * time.Minute,
		"jest":          5 * time.Minute,
		"make":          10 * time.Minute,
		"eslint":        60 * time.Second,
		"prettier":      30 * time.Second,
		"git":           30 * time.Second,
	}
}

// DefaultEnvBlocklist returns the glob patterns (matched case-insensitively
// against variable names) of environment variables removed from every child.
func DefaultEnvBlocklist() []string {
	return []string{
		"*_API_KEY", "*_APIKEY", "*API_KEY*", "*_SECRET", "*_SECRET_*", "*SECRET_KEY*",
		"*_TOKEN", "*_TOKEN_*", "*_PASSWORD", "*_PASSWD", "*_PASS",
		"*_CREDENTIALS", "*_CREDENTIAL", "*_PRIVATE_KEY", "*_ACCESS_KEY*", "*_AUTH",
		"AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS",
		"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
		"GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "NPM_TOKEN", "NODE_AUTH_TOKEN",
		"PGPASSWORD", "MYSQL_PWD", "DATABASE_URL", "*_DATABASE_URL", "*_DSN",
		"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "NETRC", "DOCKER_AUTH_CONFIG",
	}
}

// Options configure an [Executor]. The zero value of every field but WorkDir
// means "use the default"; call EnsureDefaults then Validate (NewExecutor
// does both).
type Options struct {
	// WorkDir is the session's work directory. Every path a tool receives is
	// resolved against it and must stay inside it.
	WorkDir string `json:"work_dir" yaml:"work_dir"`

	// Permissions is the per-agent allow-list. The zero value allows
	// nothing: pass DefaultPolicy() or a policy from configuration.
	Permissions Policy `json:"permissions" yaml:"permissions"`

	Env      EnvOptions     `json:"env" yaml:"env"`
	Secrets  SecretOptions  `json:"secrets" yaml:"secrets"`
	Timeouts TimeoutOptions `json:"timeouts" yaml:"timeouts"`
	Kill     KillOptions    `json:"kill" yaml:"kill"`
	Output   OutputOptions  `json:"output" yaml:"output"`
	Files    FileOptions    `json:"files" yaml:"files"`

	// Shell is the program and flags that run an exec command line when
	// shell mode is asked for. Default ["/bin/sh", "-c"].
	Shell []string `json:"shell" yaml:"shell"`

	// MaxConcurrent bounds the subprocesses this executor runs at once when
	// it has no Pool; further calls wait for a slot (or their context).
	// Default DefaultMaxProcesses().
	MaxConcurrent int `json:"max_concurrent" yaml:"max_concurrent"`

	// Pool, if set, bounds the subprocesses of every executor sharing it
	// instead (a server's, over all its sessions), with a part of it
	// reserved for the user's own requests (ForUser).
	Pool *Pool `json:"-" yaml:"-"`

	// MemoryLimit caps the memory of each tool process (its private
	// writable memory, RLIMIT_DATA, which its children inherit): an
	// allocation beyond it fails, and the result says the limit was
	// exceeded. 0 means DefaultMemoryLimit(); -1 means no limit.
	MemoryLimit ByteSize `json:"memory_limit,omitempty" yaml:"memory_limit,omitempty"`

	// Logger receives kill-sequence escalations and cleanup warnings.
	// Default: discard.
	Logger *slog.Logger `json:"-" yaml:"-"`
}

// EnvOptions control the environment of child processes.
type EnvOptions struct {
	// Base is the environment children start from, before scrubbing.
	// nil means the environment of this process (os.Environ) at NewExecutor.
	Base []string `json:"base,omitempty" yaml:"base,omitempty"`
	// Block lists glob patterns (path.Match syntax, case-insensitive) of
	// variable names removed from Base. nil means DefaultEnvBlocklist();
	// an empty non-nil list blocks nothing.
	Block []string `json:"block,omitempty" yaml:"block,omitempty"`
	// Allow lists exact variable names kept even when Block matches them.
	Allow []string `json:"allow,omitempty" yaml:"allow,omitempty"`
	// Set adds or overrides variables after scrubbing (operator
	// configuration, e.g. GIT_AUTHOR_NAME). Values of Set variables whose
	// names Block matches are treated as secrets by the redactor.
	Set map[string]string `json:"set,omitempty" yaml:"set,omitempty"`
}

// SecretOptions configure the [Redactor].
type SecretOptions struct {
	// Values are literal secrets redacted wherever they appear. Each must be
	// at least 4 bytes long.
	Values []string `json:"values,omitempty" yaml:"values,omitempty"`
	// Patterns are extra regular expressions (RE2) whose matches are
	// redacted, in addition to the built-in secret shapes.
	Patterns []string `json:"patterns,omitempty" yaml:"patterns,omitempty"`
	// MinValueLen is the shortest value of a blocked environment variable
	// that is collected as a literal secret (shorter values such as "1"
	// would redact ordinary text). Default 8.
	MinValueLen int `json:"min_value_len,omitempty" yaml:"min_value_len,omitempty"`
	// Replacement replaces every secret. Default "[REDACTED]".
	Replacement string `json:"replacement,omitempty" yaml:"replacement,omitempty"`
}

// TimeoutOptions configure the adaptive timeout of subprocesses.
//
// A process is stopped when it has run longer than its base timeout and has
// written no meaningful output for ExtendOnOutput, or when it has run for Max
// whatever it writes. Output lines that are only noise (dots, spinner
// characters, bare percentages, progress bars, blank lines) do not count.
type TimeoutOptions struct {
	// Default is the base timeout of a command no PerCommand key matches.
	Default time.Duration `json:"default,omitempty" yaml:"default,omitempty"`
	// PerCommand maps the leading words of a command ("go test", "git") to
	// its base timeout; the longest matching key wins. nil means
	// DefaultCommandTimeouts().
	PerCommand map[string]time.Duration `json:"per_command,omitempty" yaml:"per_command,omitempty"`
	// ExtendOnOutput is how long meaningful output keeps a process alive
	// past its base timeout. Default 30s.
	ExtendOnOutput time.Duration `json:"extend_on_output,omitempty" yaml:"extend_on_output,omitempty"`
	// Max is the hard cap on a process's run time. Default 30m.
	Max time.Duration `json:"max,omitempty" yaml:"max,omitempty"`
	// NoisePatterns are extra regular expressions; a trimmed output line
	// matching one is noise.
	NoisePatterns []string `json:"noise_patterns,omitempty" yaml:"noise_patterns,omitempty"`
}

// KillOptions configure the kill sequence run on a process group when a call
// is cancelled or times out: SIGINT, then SIGTERM after SIGINTGrace, then
// SIGKILL after SIGTERMGrace more.
type KillOptions struct {
	SIGINTGrace  time.Duration `json:"sigint_grace,omitempty" yaml:"sigint_grace,omitempty"`
	SIGTERMGrace time.Duration `json:"sigterm_grace,omitempty" yaml:"sigterm_grace,omitempty"`
	// KillWait bounds the wait, after SIGKILL or after the main process
	// exited, for the group to disappear and the output pipes to close (a
	// process that left the group may hold them). Default 2s.
	KillWait time.Duration `json:"kill_wait,omitempty" yaml:"kill_wait,omitempty"`
}

// OutputOptions bound the captured output of a subprocess, per stream.
//
// Memory is bounded by MaxBytes per stream whatever the process writes: at
// most HeadLines+TailLines+ImportantLines lines are kept, each cut to
// MaxBytes/(HeadLines+TailLines+ImportantLines+1) bytes.
type OutputOptions struct {
	MaxBytes       int `json:"max_bytes,omitempty" yaml:"max_bytes,omitempty"`
	HeadLines      int `json:"head_lines,omitempty" yaml:"head_lines,omitempty"`
	TailLines      int `json:"tail_lines,omitempty" yaml:"tail_lines,omitempty"`
	ImportantLines int `json:"important_lines,omitempty" yaml:"important_lines,omitempty"`
	// ImportantPatterns are extra regular expressions; a line between the
	// head and the tail matching one is kept, like lines with errors,
	// warnings, file:line:col locations and stack frames.
	ImportantPatterns []string `json:"important_patterns,omitempty" yaml:"important_patterns,omitempty"`
}

// FileOptions bound the file tools.
type FileOptions struct {
	// MaxReadBytes caps the text read_file returns. Default 256 KiB.
	MaxReadBytes int `json:"max_read_bytes,omitempty" yaml:"max_read_bytes,omitempty"`
	// ReadLines is the default number of lines read_file returns. Default 2000.
	ReadLines int `json:"read_lines,omitempty" yaml:"read_lines,omitempty"`
	// MaxWriteBytes caps the content write_file and edit_file write. Default 8 MiB.
	MaxWriteBytes int `json:"max_write_bytes,omitempty" yaml:"max_write_bytes,omitempty"`
	// MaxEntries caps the entries list and glob return. Default 1000.
	MaxEntries int `json:"max_entries,omitempty" yaml:"max_entries,omitempty"`
	// MaxMatches caps the matches grep returns. Default 200.
	MaxMatches int `json:"max_matches,omitempty" yaml:"max_matches,omitempty"`
	// MaxGrepFileBytes: grep skips larger files. Default 4 MiB.
	MaxGrepFileBytes int64 `json:"max_grep_file_bytes,omitempty" yaml:"max_grep_file_bytes,omitempty"`
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Env.Block == nil {
		o.Env.Block = DefaultEnvBlocklist()
	}
	o.Secrets.ensureDefaults()
	t := &o.Timeouts
	if t.Default == 0 {
		t.Default = DefaultTimeout
	}
	if t.PerCommand == nil {
		t.PerCommand = DefaultCommandTimeouts()
	}
	if t.ExtendOnOutput == 0 {
		t.ExtendOnOutput = DefaultExtendOnOutput
	}
	if t.Max == 0 {
		t.Max = DefaultMaxTimeout
	}
	k := &o.Kill
	if k.SIGINTGrace == 0 {
		k.SIGINTGrace = DefaultSIGINTGrace
	}
	if k.SIGTERMGrace == 0 {
		k.SIGTERMGrace = DefaultSIGTERMGrace
	}
	if k.KillWait == 0 {
		k.KillWait = DefaultKillWait
	}
	out := &o.Output
	if out.MaxBytes == 0 {
		out.MaxBytes = DefaultMaxOutputBytes
	}
	if out.HeadLines == 0 {
		out.HeadLines = DefaultHeadLines
	}
	if out.TailLines == 0 {
		out.TailLines = DefaultTailLines
	}
	if out.ImportantLines == 0 {
		out.ImportantLines = DefaultImportantLines
	}
	f := &o.Files
	if f.MaxReadBytes == 0 {
		f.MaxReadBytes = DefaultMaxReadBytes
	}
	if f.ReadLines == 0 {
		f.ReadLines = DefaultReadLines
	}
	if f.MaxWriteBytes == 0 {
		f.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if f.MaxEntries == 0 {
		f.MaxEntries = DefaultMaxEntries
	}
	if f.MaxMatches == 0 {
		f.MaxMatches = DefaultMaxMatches
	}
	if f.MaxGrepFileBytes == 0 {
		f.MaxGrepFileBytes = DefaultMaxGrepFileBytes
	}
	if len(o.Shell) == 0 {
		o.Shell = []string{"/bin/sh", "-c"}
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = DefaultMaxProcesses()
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports the first problem in o, wrapped in ErrInvalidOptions. It
// expects EnsureDefaults to have run.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	if o.WorkDir == "" {
		return bad("work_dir is required")
	}
	if err := o.Permissions.Validate(); err != nil {
		return err
	}
	for _, p := range o.Env.Block {
		if _, err := path.Match(p, ""); err != nil {
			return bad("env.block pattern %q: %w", p, err)
		}
	}
	for _, v := range o.Secrets.Values {
		if len(v) < minConfiguredSecretLen {
			return bad("secrets.values: a value of %d bytes is shorter than %d and would redact ordinary text", len(v), minConfiguredSecretLen)
		}
	}
	if o.Secrets.MinValueLen < minConfiguredSecretLen {
		return bad("secrets.min_value_len %d is below %d", o.Secrets.MinValueLen, minConfiguredSecretLen)
	}
	for _, group := range []struct {
		name string
		pats []string
	}{
		{"secrets.patterns", o.Secrets.Patterns},
		{"timeouts.noise_patterns", o.Timeouts.NoisePatterns},
		{"output.important_patterns", o.Output.ImportantPatterns},
	} {
		for _, p := range group.pats {
			if _, err := regexp.Compile(p); err != nil {
				return bad("%s %q: %w", group.name, p, err)
			}
		}
	}
	t := o.Timeouts
	for name, d := range map[string]time.Duration{
		"timeouts.default": t.Default, "timeouts.extend_on_output": t.ExtendOnOutput, "timeouts.max": t.Max,
		"kill.sigint_grace": o.Kill.SIGINTGrace, "kill.sigterm_grace": o.Kill.SIGTERMGrace, "kill.kill_wait": o.Kill.KillWait,
	} {
		if d <= 0 {
			return bad("%s must be positive, got %v", name, d)
		}
	}
	if t.Default > t.Max {
		return bad("timeouts.default %v exceeds timeouts.max %v", t.Default, t.Max)
	}
	for cmd, d := range t.PerCommand {
		if d <= 0 || d > t.Max {
			return bad("timeouts.per_command[%q] = %v must be in (0, %v]", cmd, d, t.Max)
		}
	}
	out := o.Output
	if out.HeadLines < 0 || out.TailLines < 0 || out.ImportantLines < 0 {
		return bad("output line counts must not be negative")
	}
	if out.lineBytes() < minLineBytes {
		return bad("output.max_bytes %d leaves less than %d bytes per kept line", out.MaxBytes, minLineBytes)
	}
	f := o.Files
	if f.MaxReadBytes < 0 || f.ReadLines < 0 || f.MaxWriteBytes < 0 || f.MaxEntries < 0 || f.MaxMatches < 0 || f.MaxGrepFileBytes < 0 {
		return bad("files limits must not be negative")
	}
	if o.MaxConcurrent < 1 {
		return bad("max_concurrent must be at least 1, got %d", o.MaxConcurrent)
	}
	if err := CheckMemoryLimit(o.MemoryLimit); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

func (s *SecretOptions) ensureDefaults() {
	if s.MinValueLen == 0 {
		s.MinValueLen = DefaultMinSecretLen
	}
	if s.Replacement == "" {
		s.Replacement = DefaultRedaction
	}
}

// lineBytes is the byte budget of one kept line.
func (o OutputOptions) lineBytes() int {
	return o.MaxBytes / (o.HeadLines + o.TailLines + o.ImportantLines + 1)
}
