// Package config is `sylk config`: the effective configuration, where each
// value came from, and a check of the config files.
package config

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

func NewCmdConfig(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective configuration and check the config files",
		Long: `Sylk's configuration is layered, each layer over the one before: built-in
defaults, the user's $XDG_CONFIG_HOME/sylk/config.yaml (~/.config/sylk), the
project's .sylk/config.yaml (the nearest from the working directory up), the
SYLK_* variables, then the command-line flags. An unknown key or a value of the
wrong type is an error that names the file, the line and the key.

A running 'sylk serve' watches both files: an edit is checked and, if valid,
taken without a restart where that is safe (log_level, hooks, and the llm
settings: model, agent_models, budgets, prices, max_context_tokens,
reserve_tokens, max_tokens, no_stream, retries and backoffs); the other keys
wait for a restart. A bad edit is refused with every problem listed and the
server keeps the configuration it runs. Either way the outcome is an event
(config_changed, config_rejected) in the system session:
  sylk tail --session system --type config_changed`,
	}
	cmd.AddCommand(newCmdShow(f), newCmdCheck(f))
	return cmd
}

// showJSON is what `sylk config show --json` prints.
type showJSON struct {
	Files    []string          `json:"files"`
	Settings []cmdutil.Setting `json:"settings"`
}

func newCmdShow(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration and where each value came from",
		Long: `Print every configuration value in effect for a command run here, with its
source: the config file that set it, "env" (a SYLK_* variable), "flag", or
"default". Keys are dotted as in the files (llm.budgets.session). Passwords
and tokens are masked; the LLM API key is read from the environment only and
never shown.`,
		Example: `  sylk config show
  sylk config show --json | jq -r '.settings[] | select(.source != "default") | .key'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := f.Cfg
			cfg.Data = f.BrokerOptions().DataDir
			if cfg.LLM.Configured() {
				cfg.LLM.EnsureDefaults()
			}
			cfg.Pipelines = cfg.Pipelines.WithDefaults()
			out := showJSON{Files: f.ConfigFiles, Settings: f.Origins.Settings(cfg)}
			if out.Files == nil {
				out.Files = []string{}
			}
			if asJSON {
				return f.IO.PrintJSON(out)
			}
			w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tVALUE\tSOURCE")
			for _, s := range out.Settings {
				fmt.Fprintf(w, "%s\t%s\t%s\n", s.Key, text(s.Value), s.Source)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the files read and the settings as one JSON object")
	return cmd
}

// text is a value as one line: strings as they are, others in JSON.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func newCmdCheck(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Check the config files and report every problem",
		Long: `Read the config files, the SYLK_* variables and the flags as every command
does, and report every problem found (an unknown key, a wrong type, a bad
duration, an unknown hook point or agent) at once. Exit code 0 when the
configuration is valid, 2 when it is not. Run it after editing a config file
that a running 'sylk serve' watches: it refuses the same edits.`,
		Example: `  sylk config check && echo ok`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Configure, before this runs, refused a bad configuration.
			if len(f.ConfigFiles) == 0 {
				fmt.Fprintln(f.IO.Out, "valid: no config file (defaults, variables and flags only)")
				return nil
			}
			for _, file := range f.ConfigFiles {
				fmt.Fprintln(f.IO.Out, "valid:", file)
			}
			return nil
		},
	}
}
