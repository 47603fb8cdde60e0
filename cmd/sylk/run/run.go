// Package run is `sylk run`: run a workflow plan, or a request in plain words
// planned by the agents, and follow it until it ends.
package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// RunOptions are the flags of `sylk run`.
type RunOptions struct {
	// Plan is a plan file; Request a request in plain words (one of them).
	Plan    string
	Request string
	Session string
	Detach  bool
	JSON    bool
	// Yes approves the plan of a request without asking.
	Yes bool
	// Interactive: stdin is a terminal, where plans and questions are put
	// to the user.
	Interactive bool
}

func NewCmdRun(f *cmdutil.Factory) *cobra.Command {
	opts := &RunOptions{}
	cmd := &cobra.Command{
		Use:   "run PLAN.yaml | \"REQUEST\"",
		Short: "Run a workflow plan, or ask the agents to plan and do a request (LLM)",
		Long: `Validate a plan file, submit it to the Orchestrator in a new session (or the one
given) and show its progress until the workflow completes: node states, a
progress bar on a terminal, failures as they happen. The exit code is 0 only if
every node succeeded.

An argument that is not one word ending in .yaml, .yml or .json (or -) is a
request in plain words, for the LLM tier (see --llm-model; without an LLM the
command fails at once, exit 2, saying how to configure one). The request goes
to the Guide in a new session whose tools run in the current directory; the
Guide classifies it and the Architect plans it. The plan is shown (its nodes
and why), and put to you:

  - on a terminal: approve, reject, or modify it with feedback (a new plan
    follows); a question the agents need answered is asked the same way;
  - with --yes: approved at once (questions are still asked on a terminal);
  - otherwise (stdin is not a terminal, no --yes): run prints the plan or the
    question and how to answer it, and exits 0; the plan waits in the session
    for 'sylk plan approve', 'reject' or 'modify' ('sylk plan answer' for a
    question), which go on from there.

Once approved, the DAG is followed as a plan file's is; exit 0 only if every
node succeeded (3 if it failed or you rejected the plan).

Tools run in the current directory (a node's args.dir is relative to it). With no
'sylk serve' running on the data directory, run starts an embedded server with
the projections and agents for its own duration.

A plan is YAML (or JSON):

  name: build-and-test
  policy: {max_concurrency: 4, fail_fast: true, retry: {max: 2, backoff: 2s}}
  nodes:
    - id: build
      agent: engineer          # engineer, inspector or tester
      tool: exec               # exec, read_file, write_file, edit_file, list, glob, grep, git_*
      args: {argv: [go, build, ./...]}
    - id: test
      agent: tester
      tool: exec
      args: {argv: [go, test, ./...]}
      depends_on: [build]
      timeout: 5m

Unknown keys are errors naming the key and the node; every problem is listed.`,
		Example: `  sylk run examples/build-and-test.yaml
  sylk run plan.yaml --session S1
  sylk run plan.yaml --detach --json      # with 'sylk serve' running: submit and print ids

  # With an LLM (any OpenAI-compatible endpoint):
  export SYLK_LLM_BASE_URL=http://localhost:11434/v1 SYLK_LLM_MODEL=qwen2.5-coder:14b
  sylk run "add input validation to the config loader"
  sylk run "add input validation to the config loader" --yes --json | jq .outcome
  sylk run "rename Foo to Bar in pkg/x" < /dev/null   # plan, print it, exit; then: sylk plan approve`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmdutil.IsPlanPath(args[0]) {
				if strings.TrimSpace(args[0]) == "" {
					return cmdutil.Usagef("the request is empty: say what you want done, or give a plan file")
				}
				opts.Request = args[0]
				opts.Interactive = conversation.StdinTerminal(f.IO.In)
				return runRequest(cmd.Context(), f, opts)
			}
			if opts.Yes {
				return cmdutil.Usagef("--yes approves the plan of a request; a plan file needs no approval")
			}
			opts.Plan = args[0]
			return runRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "run in this existing session (default: a new one named after the plan or request)")
	cmd.Flags().BoolVar(&opts.Detach, "detach", false, "submit and exit (needs a running 'sylk serve')")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "approve the plan of a request without asking")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the outcome (or, with --detach, the ids) as one JSON object")
	return cmd
}

func runRun(ctx context.Context, f *cmdutil.Factory, opts *RunOptions) error {
	_, llmErr := f.LLMConfig()
	if llmErr != nil && !errors.Is(llmErr, llm.ErrNotConfigured) {
		return llmErr
	}
	// Whether prompt nodes can run depends on the server that runs them:
	// checked below, once it is known.
	p, _, err := f.LoadPlan(opts.Plan)
	if err != nil {
		return err
	}
	if p.DAG.ID == "" {
		p.DAG.ID = schemas.NewID()
	}
	if p.DAG.Name == "" {
		p.DAG.Name = strings.TrimSuffix(filepath.Base(opts.Plan), filepath.Ext(opts.Plan))
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	srv, started, err := f.Server(ctx)
	if err != nil {
		return err
	}
	if started && llmErr != nil {
		// This command runs the agents, and they have no LLM.
		for _, n := range p.DAG.Nodes {
			if n.Prompt != "" {
				return conversation.ErrNeedsLLM(fmt.Sprintf("%s: node %q is a prompt node, which", opts.Plan, n.ID))
			}
		}
	}
	if opts.Detach && started {
		return errDetachNeedsServer(f)
	}
	log := events.New(srv.JetStream())
	session := opts.Session
	var submit []*schemas.Envelope
	if session == "" {
		if session, submit, err = conversation.NewSession(f, p.DAG.Name, wd); err != nil {
			return err
		}
	} else if err := schemas.CheckName("--session", session); err != nil {
		return cmdutil.UsageError{Err: err}
	}
	exec, err := schemas.New(schemas.TypeDAGExecute, session, "user", "orchestrator", f.Now(), schemas.DAGExecute{DAG: p.DAG, WorkDir: wd})
	if err != nil {
		return err
	}
	// The user's own request: its nodes' tools may use the slots kept for
	// the user (the priority passes to every event derived from it).
	exec.Priority = schemas.PriorityUserInteractive
	submit = append(submit, exec)
	seqs, err := log.AppendBatch(ctx, submit)
	if err != nil {
		return err
	}
	seq := seqs[len(seqs)-1]
	out := conversation.Outcome{Session: session, DAG: p.DAG.ID, Seq: seq}
	if opts.Detach {
		if opts.JSON {
			return f.IO.PrintJSON(out)
		}
		fmt.Fprintf(f.IO.Out, "submitted %s (%d nodes) as DAG %s in session %s; follow it with: sylk tail --session %s\n", p.DAG.Name, len(p.DAG.Nodes), p.DAG.ID, session, session)
		return nil
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.ErrOut, "running %s: %d nodes, DAG %s, session %s\n", p.DAG.Name, len(p.DAG.Nodes), p.DAG.ID, session)
	}
	view := conversation.NewRunView(f.IO, &p.DAG, opts.JSON)
	if err := conversation.Follow(ctx, log, session, seq, p.DAG.ID, view); err != nil {
		return err
	}
	return view.End(out)
}
