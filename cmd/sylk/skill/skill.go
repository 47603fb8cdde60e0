// Package skill is `sylk skill`: list, show, validate and create the skills
// (SKILL.md directories) the agents load.
package skill

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/skills"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// NewCmdSkill is `sylk skill` and its subcommands.
func NewCmdSkill(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skill",
		Short: "List, show, validate and create skills (SKILL.md) the agents load",
		Long: `Skills are instructions an agent loads when its task calls for them: a
directory whose name is the skill's name, holding a SKILL.md (YAML frontmatter:
name, description, allowed-tools, metadata with agents, tier, load-trigger,
keywords, priority; then markdown instructions).

They are read from, in this order (the first of a name wins):
  the project's .sylk/skills, .agent/skills, .claude/skills
  $XDG_CONFIG_HOME/sylk/skills (~/.config/sylk/skills), ~/.agent/skills, ~/.claude/skills
  the skills built into sylk

Tier 0 and 1 skills load when an agent starts a task, tier 2 when their load
trigger matches the task (whole words, any case), tier 3 only when a plan node
names them (skills: [name]).`,
		Example: `  sylk skill ls --agent engineer
  sylk skill show go-testing
  sylk skill new release-notes && $EDITOR .sylk/skills/release-notes/SKILL.md
  sylk skill validate .sylk/skills
  sylk skill loadout s-1a2b3c4d --agent engineer`,
	}
	cmd.AddCommand(newCmdList(f), newCmdShow(f), newCmdValidate(f), newCmdNew(f), newCmdLoadout(f))
	return cmd
}

// catalogue reads the skills as the agents would for a task run in project.
func catalogue(f *cmdutil.Factory, project string) (*skills.Catalogue, error) {
	if project == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		project = wd
	}
	return f.SkillsCache().Discover(skills.SearchPath(project, skills.UserDirs()), 0), nil
}

// listed is one skill in `skill ls --json`.
type listed struct {
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	Tier         int               `json:"tier"`
	Agents       []string          `json:"agents,omitempty"`
	LoadTrigger  string            `json:"load_trigger,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Priority     int               `json:"priority"`
	AllowedTools []string          `json:"allowed_tools,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Source       string            `json:"source"`
	Dir          string            `json:"dir"`
	Chars        int               `json:"chars"`
	// Shadows are the locations of the same name that this one hides.
	Shadows []string `json:"shadows,omitempty"`
}

func listedOf(s *skills.Skill, c *skills.Catalogue) listed {
	l := listed{Name: s.Name, Description: s.Description, Tier: s.Tier, Agents: s.Agents, LoadTrigger: s.Trigger, Keywords: s.Keywords,
		Priority: s.Priority, AllowedTools: s.AllowedTools, Source: s.Source, Dir: s.Dir, Chars: s.Chars}
	if len(s.Metadata) > 0 {
		l.Metadata = s.Metadata
	}
	for _, sh := range c.Shadowed {
		if sh.Name == s.Name {
			l.Shadows = append(l.Shadows, sh.Dropped)
		}
	}
	return l
}

type listOptions struct {
	Agent, Project string
	JSON           bool
}

func newCmdList(f *cmdutil.Factory) *cobra.Command {
	opts := &listOptions{}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the skills the agents can load, and the ones that are broken or shadowed",
		Long: `List the skills of the catalogue an agent sees for a task in this directory
(--project for another): name, tier, agents, where it comes from, description.
Broken skills (the agents skip them) and names hidden by an earlier location are
listed after, on stderr.`,
		Example: `  sylk skill ls
  sylk skill ls --agent tester
  sylk skill ls --json | jq -r 'select(.tier == 2) | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return listRun(f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "only the skills this agent may load (engineer, inspector, tester, ...)")
	cmd.Flags().StringVar(&opts.Project, "project", "", "the project directory whose skills count (default: the current directory)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per skill")
	return cmd
}

func listRun(f *cmdutil.Factory, opts *listOptions) error {
	if opts.Agent != "" && !skills.ValidName(opts.Agent) {
		return cmdutil.Usagef("--agent %q: not an agent name", opts.Agent)
	}
	c, err := catalogue(f, opts.Project)
	if err != nil {
		return err
	}
	out := f.IO.Out
	if opts.JSON {
		enc := json.NewEncoder(out)
		for _, s := range c.For(opts.Agent) {
			if err := enc.Encode(listedOf(s, c)); err != nil {
				return err
			}
		}
	} else {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tTIER\tAGENTS\tSOURCE\tDESCRIPTION")
		for _, s := range c.For(opts.Agent) {
			agents := strings.Join(s.Agents, ",")
			if agents == "" {
				agents = "all"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.Name, s.Tier, agents, s.Source, firstLine(s.Description, 70))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, sh := range c.Shadowed {
		fmt.Fprintf(f.IO.ErrOut, "shadowed: %s is %s, which hides %s\n", sh.Name, sh.Kept, sh.Dropped)
	}
	for _, fl := range c.Failed {
		fmt.Fprintf(f.IO.ErrOut, "broken: %s: %s (run sylk skill validate on it)\n", fl.Path, fl.Reason)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(f.IO.ErrOut, "warning: %v\n", w)
	}
	return nil
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newCmdShow(f *cmdutil.Factory) *cobra.Command {
	var project string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a skill: where it comes from, its settings and its instructions",
		Example: `  sylk skill show debugging
  sylk skill show go-testing --json | jq .load_trigger`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := catalogue(f, project)
			if err != nil {
				return err
			}
			s, ok := c.Skills[args[0]]
			if !ok {
				for _, fl := range c.Failed {
					if fl.Name == args[0] {
						return fmt.Errorf("skill %q is broken, the agents skip it: %s: %s", args[0], fl.Path, fl.Reason)
					}
				}
				return fmt.Errorf("%w %q: the catalogue has %s (sylk skill ls)", skills.ErrUnknown, args[0], strings.Join(c.Names, ", "))
			}
			l := listedOf(s, c)
			if asJSON {
				v := struct {
					listed
					Body       string   `json:"body"`
					References []string `json:"references,omitempty"`
					Assets     []string `json:"assets,omitempty"`
					Scripts    []string `json:"scripts,omitempty"`
				}{l, s.Body, s.References, s.Assets, s.Scripts}
				return json.NewEncoder(f.IO.Out).Encode(v)
			}
			return show(f.IO.Out, l, s)
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "the project directory whose skills count (default: the current directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the skill as one JSON object, body included")
	return cmd
}

func show(w io.Writer, l listed, s *skills.Skill) error {
	agents := strings.Join(l.Agents, ", ")
	if agents == "" {
		agents = "all"
	}
	when := map[int]string{0: "always", 1: "at agent start", 2: "when the load trigger matches the task", 3: "only when a node names it"}[l.Tier]
	fmt.Fprintf(w, "%s  (%s, %s)\n%s\n\n", l.Name, l.Source, l.Dir, l.Description)
	fmt.Fprintf(w, "tier:          %d (%s)\nagents:        %s\npriority:      %d\n", l.Tier, when, agents, l.Priority)
	if l.LoadTrigger != "" {
		fmt.Fprintf(w, "load trigger:  %s\n", l.LoadTrigger)
	}
	if len(l.Keywords) > 0 {
		fmt.Fprintf(w, "keywords:      %s\n", strings.Join(l.Keywords, ", "))
	}
	if len(l.AllowedTools) > 0 {
		fmt.Fprintf(w, "allowed tools: %s\n", strings.Join(l.AllowedTools, ", "))
	}
	for _, x := range []struct {
		name  string
		files []string
	}{{"references", s.References}, {"assets", s.Assets}, {"scripts", s.Scripts}} {
		if len(x.files) > 0 {
			fmt.Fprintf(w, "%-14s %s\n", x.name+":", strings.Join(x.files, ", "))
		}
	}
	for _, sh := range l.Shadows {
		fmt.Fprintf(w, "hides:         %s\n", sh)
	}
	_, err := fmt.Fprintf(w, "\n%s\n", s.Body)
	return err
}

func newCmdValidate(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "validate DIR",
		Short: "Check a skill, or a directory of skills, and report every problem at once",
		Long: `Check SKILL.md files against the format: DIR is one skill (it holds a
SKILL.md) or a directory of skills. Every problem of every skill is printed,
one a line, as PATH: FIELD: PROBLEM. Exit status 2 when there is any (an
oversized body included: agents would see it truncated), 0 when all are valid.`,
		Example: `  sylk skill validate .sylk/skills
  sylk skill validate ~/.config/sylk/skills/my-skill`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return validateRun(f, args[0])
		},
	}
}

func validateRun(f *cmdutil.Factory, dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return cmdutil.Usagef("%s: %v", dir, errors.Unwrap(err))
	}
	if !info.IsDir() {
		return cmdutil.Usagef("%s is a file: give the skill's directory (the one holding %s) or a directory of skills", dir, skills.FileName)
	}
	// One skill, or a directory of them.
	root, names := filepath.Dir(filepath.Clean(dir)), []string{filepath.Base(filepath.Clean(dir))}
	if _, err := os.Stat(filepath.Join(dir, skills.FileName)); err != nil {
		root, names = dir, nil
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), skills.FileName)); err == nil {
				names = append(names, e.Name())
			}
		}
		if len(names) == 0 {
			return cmdutil.Usagef("%s holds no skill: no %s in it or in its subdirectories", dir, skills.FileName)
		}
	}
	fsys := os.DirFS(root)
	problems := 0
	for _, n := range names {
		_, probs := skills.Parse(fsys, n, 0)
		for _, p := range probs {
			p.Path = filepath.Join(root, filepath.FromSlash(p.Path))
			fmt.Fprintln(f.IO.Out, p.Error())
			problems++
		}
	}
	if problems > 0 {
		fmt.Fprintf(f.IO.ErrOut, "%d problems in %d skills\n", problems, len(names))
		return cmdutil.ExitCodeError{Code: cmdutil.ExitUsage}
	}
	fmt.Fprintf(f.IO.Out, "ok: %d skills valid\n", len(names))
	return nil
}

// skeleton is a new skill: valid as it is, with every key shown.
const skeleton = `---
name: %s
description: What this skill does and when to use it (the agents see this line; be specific).
# allowed-tools: read_file grep exec
metadata:
  # agents: engineer tester        # who may load it (default: every agent)
  tier: 2                          # 0-1 at agent start, 2 when the trigger matches, 3 only when named
  load-trigger: %s                 # words or phrases separated by |, matched as whole words
  priority: 50                     # 0-100, higher loads first
---
# %s

Write the instructions here: the steps to follow, the checks to run, the
mistakes to avoid. Keep it under 20,000 characters; put long material in
references/ and mention the files here.
`

func newCmdNew(f *cmdutil.Factory) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Create a skill skeleton that validates, ready to edit",
		Long: `Create DIR/NAME/SKILL.md (DIR is .sylk/skills by default, the project's own
skills) with every key shown and commented. NAME is 1-64 of a-z, 0-9 and '-'.`,
		Example: `  sylk skill new release-notes
  sylk skill new my-style --dir ~/.config/sylk/skills`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !skills.ValidName(name) {
				return cmdutil.Usagef("%q is not a skill name: 1-%d of a-z, 0-9 and '-', no '-' at either end or twice in a row", name, skills.MaxNameLen)
			}
			path := filepath.Join(dir, name, skills.FileName)
			if _, err := os.Stat(path); err == nil {
				return fmt.Errorf("%s exists: edit it, or pick another name", path)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			text := fmt.Sprintf(skeleton, name, strings.ReplaceAll(name, "-", " "), name)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "created %s\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", filepath.Join(".sylk", "skills"), "the skills directory to create it in")
	return cmd
}
