// Package permit is `sylk permit`: the user's answers to the agents'
// permission requests.
package permit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func NewCmdPermit(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "permit",
		Short: "List and answer the agents' permission requests",
		Long: `A command an agent's model runs goes at once when it is on the safe list (ls,
cat, grep, git status|diff|log|show|branch, go build|test|vet, make, ...), on
the agent's command list (the configuration's commands:), or when a remembered
answer covers its program; otherwise (an agent without a command list too) the
agent asks you with a permission_request and waits, up to its task's time
limit, for your answer:

  once     this request only (the default)
  session  every request of the session for the same program
  always   every request for the same program, in every session: the
           project allow-list, also written to .sylk/local/permissions.yaml

Every answer is a permission_decision event; the waiting agent goes on as soon
as the server has applied it.`,
		Example: `  sylk permit ls
  sylk permit allow 0192f3a1
  sylk permit allow 0192f3a1 --scope session
  sylk permit deny 0192f3a1 --remember --reason "never delete from build/"`,
	}
	cmd.AddCommand(newLsCmd(f), newAnswerCmd(f, schemas.DecisionAllow), newAnswerCmd(f, schemas.DecisionDeny))
	return cmd
}

// lsJSON is what `sylk permit ls --json` prints.
type lsJSON struct {
	Requests   []*projections.Permit      `json:"requests"`
	Remembered []*projections.PermitGrant `json:"remembered"`
}

func newLsCmd(f *cmdutil.Factory) *cobra.Command {
	var session string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the permission requests that wait on you, and the remembered answers",
		Example: `  sylk permit ls
  sylk permit ls --all --session s-1a2b3c4d
  sylk permit ls --json | jq -r '.requests[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if session != "" {
				if err := schemas.CheckName("--session", session); err != nil {
					return cmdutil.UsageError{Err: err}
				}
			}
			ctx := cmd.Context()
			r, err := f.State(ctx)
			if err != nil {
				return err
			}
			defer r.Close()
			filter := projections.PermitFilter{Session: session, State: projections.PermitOpen}
			if all {
				filter.State = ""
			}
			reqs, err := r.Permits(ctx, filter)
			if err != nil {
				return err
			}
			grants, err := r.PermitGrants(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(lsJSON{Requests: reqs, Remembered: grants})
			}
			if len(reqs) == 0 {
				fmt.Fprintln(f.IO.Out, "no permission request waits on you")
			} else {
				w := tabwriter.NewWriter(f.IO.Out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tSESSION\tAGENT\tSTATE\tCOMMAND\tWHY")
				for _, p := range reqs {
					state := p.State
					if p.State != projections.PermitOpen {
						state += " (" + p.Scope + ")"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Session, p.Agent, state, cmdutil.TruncateRunes(p.Target, 60), p.Reason)
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			if len(grants) > 0 {
				fmt.Fprintln(f.IO.Out, "\nremembered answers:")
				for _, g := range grants {
					where := "every session"
					if g.Session != "" {
						where = "session " + g.Session
					}
					fmt.Fprintf(f.IO.Out, "  %s %s %q in %s\n", map[bool]string{true: "allow", false: "deny"}[g.Allow], g.Action, g.Grant, where)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "only this session's requests")
	cmd.Flags().BoolVar(&all, "all", false, "also the requests already answered")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the requests and remembered answers as JSON")
	return cmd
}

// AnswerOptions are the flags of allow and deny.
type AnswerOptions struct {
	ID       string
	Scope    string
	Remember bool
	Reason   string
	JSON     bool
}

func newAnswerCmd(f *cmdutil.Factory, decision string) *cobra.Command {
	opts := &AnswerOptions{}
	short := map[string]string{
		schemas.DecisionAllow: "Allow a waiting request: the agent runs the command",
		schemas.DecisionDeny:  "Deny a waiting request: the agent is told, and the command does not run",
	}[decision]
	cmd := &cobra.Command{
		Use:   decision + " ID",
		Short: short,
		Long: short + `.

ID is the request's id from 'sylk permit ls', or a unique prefix of at least 4
characters. --scope session or always also answers the later requests for the
same program (--remember is --scope always).`,
		Example: fmt.Sprintf(`  sylk permit %[1]s 0192f3a1
  sylk permit %[1]s 0192f3a1 --scope session --json
  sylk permit %[1]s 0192f3a1 --remember`, decision),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.Remember {
				if cmd.Flags().Changed("scope") && opts.Scope != schemas.PermitAlways {
					return cmdutil.Usagef("--remember is --scope always; it contradicts --scope %s", opts.Scope)
				}
				opts.Scope = schemas.PermitAlways
			}
			if !slices.Contains([]string{schemas.PermitOnce, schemas.PermitSession, schemas.PermitAlways}, opts.Scope) {
				return cmdutil.Usagef("--scope %q: use once, session or always", opts.Scope)
			}
			return answerRun(cmd.Context(), f, opts, decision)
		},
	}
	cmd.Flags().StringVar(&opts.Scope, "scope", schemas.PermitOnce, "what the answer covers: once, session or always")
	cmd.Flags().BoolVar(&opts.Remember, "remember", false, "answer every later request for the same program too (--scope always)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why, shown to the agent")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the answered request as JSON")
	return cmd
}

func answerRun(ctx context.Context, f *cmdutil.Factory, opts *AnswerOptions, decision string) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	p, err := find(ctx, r, opts.ID)
	if err != nil {
		return err
	}
	if p.State != projections.PermitOpen {
		return fmt.Errorf("permission request %s was already %s (%s) at seq %d; nothing changed", p.ID, p.State, p.Scope, p.DecisionSeq)
	}
	req, err := r.Log.Get(ctx, p.Seq)
	if err != nil {
		return err
	}
	if req.Env == nil {
		return fmt.Errorf("the permission request at seq %d cannot be read: %w", p.Seq, req.Err)
	}
	env, err := conversation.UserEvent(f, p.Session, schemas.TypePermissionDecision,
		schemas.PermissionDecision{RequestID: p.ID, Decision: decision, Scope: opts.Scope, Reason: opts.Reason}, req.Env)
	if err != nil {
		return err
	}
	// The waiting agent reads the decision from the permits projection: no
	// agent consumes it, so it is addressed to the user's own log.
	env.Target = "user"
	if _, err := r.AppendApplied(ctx, env); err != nil {
		return err
	}
	if opts.Scope == schemas.PermitAlways {
		if err := materialise(ctx, r); err != nil {
			return err
		}
	}
	if p, err = r.Permit(ctx, p.ID); err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(p)
	}
	fmt.Fprintf(f.IO.Out, "%s %s: %s %q of the %s in session %s (%s)\n", p.State, p.ID, p.Action, p.Target, p.Agent, p.Session, p.Scope)
	return nil
}

// find returns the permission request id names: its id or a unique prefix
// of at least 4 characters of an open one.
func find(ctx context.Context, r *cmdutil.StateReader, id string) (*projections.Permit, error) {
	p, err := r.Permit(ctx, id)
	if err == nil {
		return p, nil
	}
	if !errors.Is(err, projections.ErrNotFound) {
		return nil, err
	}
	open, err := r.Permits(ctx, projections.PermitFilter{State: projections.PermitOpen})
	if err != nil {
		return nil, err
	}
	var found []*projections.Permit
	for _, p := range open {
		if len(id) >= 4 && strings.HasPrefix(p.ID, id) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no permission request %q waits on you ('sylk permit ls' lists those that do)", id)
	}
	ids := make([]string, len(found))
	for i, p := range found {
		ids[i] = p.ID
	}
	return nil, cmdutil.Usagef("%q names %d permission requests (%s): give more of the id", id, len(found), strings.Join(ids, ", "))
}

// localPermissions is .sylk/local/permissions.yaml: the project allow-list
// as the answers for every session left it, written from the projection
// (seed L12153-12161, L12325-12362).
type localPermissions struct {
	Commands       []string `yaml:"commands"`
	DeniedCommands []string `yaml:"denied_commands,omitempty"`
}

// materialise writes the remembered answers of every session to the
// project's .sylk/local/permissions.yaml, 0600.
func materialise(ctx context.Context, r *cmdutil.StateReader) error {
	grants, err := r.PermitGrants(ctx)
	if err != nil {
		return err
	}
	lp := localPermissions{Commands: []string{}}
	for _, g := range grants {
		if g.Session != "" || g.Action != schemas.ActionCommand {
			continue
		}
		if g.Allow {
			lp.Commands = append(lp.Commands, g.Grant)
		} else {
			lp.DeniedCommands = append(lp.DeniedCommands, g.Grant)
		}
	}
	b, err := yaml.Marshal(lp)
	if err != nil {
		return err
	}
	dir := filepath.Join(cmdutil.ProjectDir(), ".sylk", "local")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	head := "# The answers of 'sylk permit ... --scope always', written from the event log.\n# Edits are overwritten; answer with sylk permit instead.\n"
	path := filepath.Join(dir, "permissions.yaml")
	if err := os.WriteFile(path, append([]byte(head), b...), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
