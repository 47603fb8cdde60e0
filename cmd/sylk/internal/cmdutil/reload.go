package cmdutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/server"
	"github.com/sylk/sylk/tools"
)

// ConfigDirs are the directories whose config file (server.ConfigFile) a
// running server watches: the user's and the project's.
func ConfigDirs() []string {
	var dirs []string
	if d := userConfigDir(); d != "" {
		dirs = append(dirs, filepath.Join(d, "sylk"))
	}
	dirs = append(dirs, filepath.Join(ProjectDir(), ".sylk"))
	for _, f := range configFiles() {
		dirs = append(dirs, filepath.Dir(f))
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// liveKey reports whether a running server takes a change of key without a
// restart: the log level, the hooks, the tool process pool's limits and
// memory limit, the stream's disk quota and the LLM settings of llm.LiveKeys.
func liveKey(key string) bool {
	first, rest, _ := strings.Cut(key, ".")
	switch first {
	case "log_level", "hooks":
		return true
	case "tools":
		return rest == "max_processes" || rest == "user_reserved" || rest == "memory_limit"
	case "stream":
		return rest == "max_bytes"
	case "llm":
		name, _, _ := strings.Cut(rest, ".")
		return slices.Contains(llm.LiveKeys, name)
	}
	return false
}

// Reload reads the configuration again as Configure did (files, variables,
// the same flags) and compares it with the one running: what a running
// server takes after an edit of a config file.
func (f *Factory) Reload() server.Reload {
	cfg, origins, files, problems := f.readConfig(f.cmd)
	r := server.Reload{Files: files, LLM: cfg.LLM, Hooks: cfg.Hooks}
	r.MaxProcesses, r.UserReserved = cfg.Tools.PoolLimits()
	r.MaxBytes = max(int64(cfg.Stream.MaxBytes), 0)
	if r.MemoryLimit = cfg.Tools.MemoryLimit; r.MemoryLimit == 0 {
		r.MemoryLimit = tools.DefaultMemoryLimit()
	}
	for _, p := range problems {
		r.Problems = append(r.Problems, p.Error())
	}
	if len(r.Problems) > 0 {
		return r
	}
	for _, k := range changedKeys(flatten(f.Cfg), flatten(cfg)) {
		if liveKey(k) {
			r.Applied = append(r.Applied, k)
		} else {
			r.Restart = append(r.Restart, k)
		}
	}
	r.Commit = func() {
		level, _ := logLevel(cfg.LogLevel) // checked
		f.level.Set(level)
		f.Cfg, f.Origins, f.ConfigFiles = cfg, origins, files
	}
	return r
}

// userConfigDir is $XDG_CONFIG_HOME, else ~/.config ("" without a home).
func userConfigDir() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config")
	}
	return ""
}
