package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// A request with no LLM configured and no server is a usage error (exit 2)
// that says how to configure one.
func TestRequestWithoutLLMIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for k, v := range map[string]string{"SYLK_DATA": filepath.Join(dir, "data"), "HOME": dir, "XDG_CONFIG_HOME": dir,
		"SYLK_LLM_MODEL": "", "SYLK_LLM_BASE_URL": "", "OPENAI_BASE_URL": ""} {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"run", "add input validation to the config loader"}, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), llm.Hint) || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
