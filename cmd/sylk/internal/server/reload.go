package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// ConfigFile is the name of a config file in the directories Options.Watch
// names.
const ConfigFile = "config.yaml"

// Reload is an edit of the config files, read and checked against the
// configuration the server runs.
type Reload struct {
	// Files are the config files read, lowest precedence first.
	Files []string
	// Problems refuse the edit: every one found, and nothing is applied.
	Problems []string
	// Applied are the changed keys (dotted, as `sylk config show` names
	// them) the server takes now; Restart the changed keys that wait for a
	// restart.
	Applied, Restart []string
	// LLM and Hooks are the new settings, taken when Applied names keys
	// under llm. or hooks.
	LLM   llm.Config
	Hooks []hooks.Config
	// MaxProcesses and UserReserved are the tool process pool's new limits,
	// taken when Applied names tools.max_processes or tools.user_reserved.
	MaxProcesses, UserReserved int
	// MemoryLimit is each tool process's new memory limit, taken when
	// Applied names tools.memory_limit.
	MemoryLimit tools.ByteSize
	// MaxBytes is the event stream's new disk quota (0: none), taken when
	// Applied names stream.max_bytes.
	MaxBytes int64
	// Commit makes the edit the running configuration, once the server has
	// taken it.
	Commit func()
}

// live is what a reload changes in a running server: what the agents
// component started with.
type live struct {
	mu      sync.Mutex
	runtime runtime.Config // the agents' configuration, as they run
	llm     *llm.Client
	hooks   *hooks.Pipeline
}

func (l *live) set(f func(*live)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l)
}

// reloadDebounce gathers the writes of one save (an editor writes, renames,
// chmods) into one reload.
const reloadDebounce = 150 * time.Millisecond

// watchConfig reloads the configuration after each edit of a config file
// in o.Watch's directories, until ctx ends. A directory that does not exist
// is not watched (its file is read at the next reload all the same).
func (s *Server) watchConfig(ctx context.Context, o Options) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch the config files: %w", err)
	}
	defer w.Close()
	for _, dir := range o.Watch {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := w.Add(dir); err != nil {
			return fmt.Errorf("watch the config files in %s: %w", dir, err)
		}
		slog.Debug("config: watching", "dir", dir)
	}
	var due <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Base(ev.Name) == ConfigFile && !ev.Has(fsnotify.Chmod) {
				due = time.After(reloadDebounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			slog.Warn("config: watching the files", "err", err)
		case <-due:
			due = nil
			if err := s.reload(ctx, o.Reload()); err != nil {
				slog.Error("config: reload", "err", err)
			}
		}
	}
}

// reload takes r: the LLM client's live settings and the hook pipeline are
// replaced, then r is committed and recorded as config_changed. A refused
// edit (its own problems, or a new hook pipeline or LLM configuration that
// does not hold) changes nothing and is recorded as config_rejected.
func (s *Server) reload(ctx context.Context, r Reload) error {
	if len(r.Problems) == 0 && len(r.Applied) == 0 && len(r.Restart) == 0 {
		return nil // saved unchanged
	}
	if len(r.Problems) == 0 {
		if err := s.apply(ctx, r); err != nil {
			r.Problems = []string{err.Error()}
		}
	}
	var env *schemas.Envelope
	var err error
	if len(r.Problems) > 0 {
		slog.Error("config: the edit is refused; the running configuration stays", "files", r.Files, "problems", strings.Join(r.Problems, "; "))
		env, err = schemas.New(schemas.TypeConfigRejected, schemas.SystemSession, "server", "user", time.Now(),
			schemas.ConfigRejected{Files: r.Files, Problems: r.Problems})
	} else {
		slog.Info("config: reloaded", "applied", strings.Join(r.Applied, ","), "restart", strings.Join(r.Restart, ","))
		env, err = schemas.New(schemas.TypeConfigChanged, schemas.SystemSession, "server", "user", time.Now(),
			schemas.ConfigChanged{Files: r.Files, Applied: r.Applied, Restart: r.Restart})
	}
	if err != nil {
		return err
	}
	_, err = events.New(s.broker.JetStream()).Append(ctx, env)
	return err
}

// apply takes r's live settings, all or none: the stream's quota first (the
// server may refuse it), put back if a later one fails.
func (s *Server) apply(ctx context.Context, r Reload) (err error) {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	changed := func(prefix string) bool {
		return slices.ContainsFunc(r.Applied, func(k string) bool { return k == prefix || strings.HasPrefix(k, prefix+".") })
	}
	if changed("stream.max_bytes") {
		was, qerr := broker.SetQuota(ctx, s.broker.JetStream(), r.MaxBytes)
		if qerr != nil {
			return fmt.Errorf("stream.max_bytes: %w", qerr)
		}
		defer func() {
			if err != nil {
				if _, back := broker.SetQuota(ctx, s.broker.JetStream(), was); back != nil {
					err = errors.Join(err, fmt.Errorf("stream.max_bytes: putting back the quota of %d bytes: %w", was, back))
				}
			}
		}()
	}
	pool := s.live.runtime.Tools.Pool
	resize := (changed("tools.max_processes") || changed("tools.user_reserved")) && pool != nil
	if resize {
		if err := tools.CheckPoolLimits(r.MaxProcesses, r.UserReserved); err != nil {
			return fmt.Errorf("tools.%w", err)
		}
	}
	remember := changed("tools.memory_limit") && pool != nil
	if remember {
		if err := tools.CheckMemoryLimit(r.MemoryLimit); err != nil {
			return fmt.Errorf("tools.%w", err)
		}
	}
	var next *hooks.Pipeline
	if changed("hooks") && s.live.hooks != nil {
		cfg := s.live.runtime
		cfg.Hooks = r.Hooks
		var err error
		if next, err = cfg.Pipeline(); err != nil {
			return err
		}
	}
	if changed("llm") && s.live.llm != nil {
		if err := s.live.llm.Reconfigure(r.LLM); err != nil {
			return errors.Join(errors.New("llm"), err)
		}
	}
	if next != nil {
		s.live.hooks.Replace(next)
	}
	if resize {
		_ = pool.SetLimits(r.MaxProcesses, r.UserReserved) // checked above
		slog.Info("tool processes: " + poolText(pool))
	}
	if remember {
		_ = pool.SetMemoryLimit(r.MemoryLimit) // checked above
		slog.Info("tool memory limit: " + s.live.runtime.Tools.MemoryLimitText())
	}
	if r.Commit != nil {
		r.Commit()
	}
	return nil
}
