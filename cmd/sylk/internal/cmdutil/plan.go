package cmdutil

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/runtime"
)

// IsPlanPath says whether an argument names a plan file rather than a
// request in plain words: "-" (stdin), or one word ending in .yaml, .yml or
// .json. A missing plan file is then an error, not a request.
func IsPlanPath(arg string) bool {
	if arg == "-" {
		return true
	}
	if strings.ContainsAny(arg, " \t\n") {
		return false
	}
	switch strings.ToLower(filepath.Ext(arg)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// LoadPlan reads a plan file ("-": stdin) and checks it whole against the
// configured agents and tools (every problem at once, each tool node's
// arguments against its tool's schema). Prompt nodes pass: whether they can
// run depends on the server that runs them. It returns the plan and its text.
func (f *Factory) LoadPlan(path string) (*plan.Plan, []byte, error) {
	src, err := readPlan(f.IO.In, path)
	if err != nil {
		return nil, nil, err
	}
	rc := f.RuntimeConfig()
	cat := rc.Catalog()
	if cat.PromptAgents == nil {
		cat.PromptAgents = runtime.ToolAgents()
	}
	p, err := plan.Load(src, cat)
	if err != nil {
		return nil, nil, Usagef("%s: %w", path, err)
	}
	return p, src, nil
}

func readPlan(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, Usagef("plan file %s does not exist", path)
	}
	return b, err
}
