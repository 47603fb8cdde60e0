package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/permit"
	"github.com/sylk/sylk/agents/planguard"
	"github.com/sylk/sylk/agents/skills"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Limits bound one prompt node's agent loop (seed 000 §5: per turn, per
// conversation; seed L21105-21232: the 3-strike rule).
type Limits struct {
	// ToolCallsPerStep is how many tool calls of one model answer run; the
	// rest are answered "not run" (default 10).
	ToolCallsPerStep int
	// ToolCalls is how many tool calls the node may make in all (default 50).
	ToolCalls int
	// Steps is how many model calls the node may make (default 30).
	Steps int
	// WallTime bounds the whole loop (default 15m; the node's timeout when
	// shorter).
	WallTime time.Duration
	// Strikes is how many failed tool calls in a row stop the node with a
	// task_help (default 3); at Strikes-1 the model is warned.
	Strikes int
	// ToolOutput bounds the bytes of one tool result given back to the model
	// (default 16 KiB; the recorded result keeps what the tool layer kept).
	ToolOutput int
}

// Defaults of Limits.
const (
	DefaultToolCallsPerStep = 10
	DefaultToolCalls        = 50
	DefaultSteps            = 30
	DefaultWallTime         = 15 * time.Minute
	DefaultStrikes          = 3
	DefaultToolOutput       = 16 << 10
)

func (l Limits) withDefaults() Limits {
	if l.ToolCallsPerStep <= 0 {
		l.ToolCallsPerStep = DefaultToolCallsPerStep
	}
	if l.ToolCalls <= 0 {
		l.ToolCalls = DefaultToolCalls
	}
	if l.Steps <= 0 {
		l.Steps = DefaultSteps
	}
	if l.WallTime <= 0 {
		l.WallTime = DefaultWallTime
	}
	if l.Strikes <= 0 {
		l.Strikes = DefaultStrikes
	}
	if l.ToolOutput <= 0 {
		l.ToolOutput = DefaultToolOutput
	}
	return l
}

// LLM is what the loop needs of the LLM tier: *llm.Client.
type LLM interface {
	Complete(ctx context.Context, d *agents.Delivery, req llm.Request) (schemas.LLMResponse, bool, error)
	// Memory keeps a conversation within the agent's context policy.
	Memory(d *agents.Delivery, key, dag, node string) *llm.Memory
}

// PromptLoop is the Prompter of the LLM tier: for a prompt node, an agent
// loop in which the model calls the built-in tools the agent may use (their
// JSON Schemas offered for tool calling), every call through the executor's
// permission checks and redaction and recorded with RunTool, until the model
// answers without a tool call. The Engineer's answer is its summary; the
// Inspector and the Tester end with a verdict in JSON, which needs the
// evidence of the tools they ran (the Tester's counts come from the test
// output, never from the model).
//
// After Limits.Strikes failed tool calls in a row (a non-zero exit, a refusal,
// arguments that are not JSON) the loop stops and reports a task_help with
// the failures, then a task_failed that is not retried; one failure before
// that, the model is warned. Reaching the step, tool-call or time limit
// reports the same way with the progress made. Every model answer and tool
// result is recorded, so a redelivered dispatch replays the loop without
// calling anything again and continues where the crash cut it.
type PromptLoop struct {
	LLM       LLM
	Executors *Executors
	Records   agents.ToolRecords
	Limits    Limits
	// Prompts override the default system prompt of an agent.
	Prompts map[string]string
	// Skills configures the skills and the lazy tool loading of the loops.
	// Records must also be a skills.Records (projections.Store is).
	Skills skills.Config
	// Hooks run around every LLM and tool call of the loop (nil: none).
	Hooks *hooks.Pipeline
	// Plans, when set, keeps a session in plan mode read-only (planguard).
	Plans planguard.State
	// Consult gives the agents their consult_<agent> tools (nil: none).
	Consult toolloop.Consulter
	// Pipelines is asked, before an Engineer hands its pipeline off,
	// whether the user stopped the chain or it is at its cap (nil: every
	// handoff is made).
	Pipelines Pipelines
	// Permits decides every exec call: the safe list, the agent's command
	// list, remembered answers, else the user (nil: the executor alone
	// decides, by the command list).
	Permits *permit.Gate
}

// reviewer agents end with a JSON verdict.
func reviewer(agent string) bool { return agent == "inspector" || agent == "tester" }

// RunPrompt runs one prompt node.
func (p *PromptLoop) RunPrompt(ctx context.Context, d *agents.Delivery, node *schemas.TaskDispatch) ([]*schemas.Envelope, error) {
	if err := waitUntil(ctx, node.NotBefore); err != nil {
		return nil, err
	}
	exec, err := p.Executors.For(node.WorkDir)
	if err != nil {
		return Outcome(d, node, "", Verdict{Summary: err.Error()})
	}
	l, err := p.newLoop(ctx, d, node, exec, task(node))
	if err != nil {
		return nil, err
	}
	l.verdict = reviewer(d.Agent)
	l.finish = func(v Verdict) ([]*schemas.Envelope, error) { return Outcome(d, node, "", v) }
	return l.run(ctx)
}

// newLoop starts the loop of node in exec's work directory: its skills
// selected (once across deliveries of d), its limits (the wall time the
// node's timeout when shorter) and the conversation begun with the agent's
// system prompt and first as the user message.
func (p *PromptLoop) newLoop(ctx context.Context, d *agents.Delivery, node *schemas.TaskDispatch, exec *tools.Executor, first string) (*loop, error) {
	records, ok := p.Records.(skills.Records)
	if !ok {
		return nil, agents.Permanent(fmt.Errorf("prompt loop: the records (%T) do not hold skill selections", p.Records))
	}
	var known []string
	for _, s := range exec.Schemas() {
		known = append(known, s.Name)
	}
	permitted, cfg := exec.SchemasFor(d.Agent), p.Skills
	if p.Consult != nil {
		// The consult tools are loaded from the start, beside the agent's
		// core tools.
		consults := p.Consult.Specs(d.Agent)
		permitted = append(permitted, consults...)
		core := cfg.Core
		if core == nil {
			core = skills.DefaultCore
		}
		cfg.Core = maps.Clone(core)
		mine := slices.Clone(core[d.Agent])
		for _, s := range consults {
			known = append(known, s.Name)
			mine = append(mine, s.Name)
		}
		cfg.Core[d.Agent] = mine
	}
	sk, err := cfg.Start(ctx, d, records, node, exec.WorkDir(), permitted, known)
	if err != nil {
		return nil, err
	}
	lim := p.Limits.withDefaults()
	wall := lim.WallTime
	if node.Timeout > 0 && node.Timeout < wall {
		wall = node.Timeout
	}
	l := &loop{p: p, d: d, node: node, exec: exec, lim: lim, skills: sk, deadline: time.Now().Add(wall), answered: map[string]bool{},
		mem: p.LLM.Memory(d, fmt.Sprintf("%s/%d", node.NodeID, node.Attempt), node.DAGID, node.NodeID)}
	l.msgs = []schemas.LLMMessage{{Role: "system", Content: p.system(d.Agent) + "\n\n" + sk.Prompt()}, {Role: "user", Content: first}}
	return l, nil
}

// loop is one run of a prompt node.
type loop struct {
	p        *PromptLoop
	d        *agents.Delivery
	node     *schemas.TaskDispatch
	exec     *tools.Executor
	lim      Limits
	skills   *skills.Loop // the loaded skills and tools
	mem      *llm.Memory
	deadline time.Time
	// verdict: the answer must be a JSON verdict (a reviewer's).
	verdict bool
	// finish turns the loop's verdict into the events to append.
	finish func(Verdict) ([]*schemas.Envelope, error)
	// stage is the pipeline stage the loop runs (nil: a prompt node).
	stage *schemas.PipelineStage
	// answered are the non-blocking consultations whose answers the
	// conversation holds.
	answered map[string]bool

	msgs     []schemas.LLMMessage
	seen     int
	sent     string   // the system message of the last call, as the hooks left it
	calls    int      // tool calls made
	okCalls  int      // of which succeeded
	strikes  int      // failures in a row
	failures []string // what failed, for the help request
	done     []string // one line per tool call, for progress and evidence
	counts   *TestCounts
	asked    bool // a reviewer was asked again for its verdict
	warned   bool
	// written are the files the loop's successful write and edit calls
	// changed, in order of first change.
	written []string
}

func (l *loop) key(step int) string {
	return fmt.Sprintf("%s/%d/step/%d", l.node.NodeID, l.node.Attempt, step)
}

func (l *loop) run(ctx context.Context) ([]*schemas.Envelope, error) {
	for step := 0; ; step++ {
		if step >= l.lim.Steps {
			return l.help(fmt.Sprintf("step limit: %d model calls without finishing", l.lim.Steps))
		}
		if time.Now().After(l.deadline) {
			return l.help("time limit reached before the task was finished")
		}
		if l.strikes == l.lim.Strikes-1 && !l.warned {
			l.warned = true
			l.msgs[0].Content += fmt.Sprintf("\n\nFAILURE WARNING: %d tool calls in a row failed on this task. One more failure stops the task "+
				"and asks for help. Stop and reassess the approach; do not retry the same thing with small changes; "+
				"do not suppress errors or skip tests to make it pass.", l.strikes)
			l.seen = 0
		}
		// The schemas of the tools loaded so far, request_tools' among them
		// on the very next request.
		if l.p.Consult != nil {
			answers, err := l.p.Consult.Arrived(ctx, l.d, l.key(step), step, l.answered)
			if err != nil {
				return nil, err
			}
			l.msgs = append(l.msgs, answers...)
		}
		specs := l.skills.Tools.Specs()
		if usage, due := l.mem.HandoffDue(l.msgs, specs); due {
			outs, err := l.handoff(ctx, usage, specs)
			if err != nil {
				return l.llmFailed(ctx, err)
			}
			if outs != nil {
				return outs, nil
			}
		}
		fitted, changed, err := l.mem.Keep(ctx, l.key(step), l.msgs, specs)
		if err != nil {
			return l.llmFailed(ctx, err)
		}
		if changed {
			l.msgs, l.seen = fitted, 0
		}
		key := l.key(step)
		resp, err := l.p.Hooks.Prompt(ctx, l.d, key, l.task(), l.msgs, func(ctx context.Context, msgs []schemas.LLMMessage) (schemas.LLMResponse, error) {
			return l.complete(ctx, key, msgs, specs)
		})
		if err != nil {
			return l.llmFailed(ctx, err)
		}
		l.seen = len(l.msgs)
		calls := resp.ToolCalls
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = fmt.Sprintf("call_%d_%d", step, i)
			}
		}
		l.msgs = append(l.msgs, schemas.LLMMessage{Role: "assistant", Content: resp.Content, ToolCalls: calls})
		if len(calls) == 0 {
			if l.verdict {
				v, ok := parseVerdict(resp.Content)
				if !ok && !l.asked {
					l.asked = true
					l.msgs = append(l.msgs, schemas.LLMMessage{Role: "user", Content: `Reply with your verdict as the JSON object only: {"passed": true or false, "summary": "...", "issues": ["..."]}`})
					continue
				}
				return l.review(v, ok, resp.Content)
			}
			return l.finish(Verdict{OK: true, Summary: strings.TrimSpace(resp.Content), Evidence: l.evidence()})
		}
		for i, tc := range calls {
			if i >= l.lim.ToolCallsPerStep {
				l.msgs = append(l.msgs, schemas.LLMMessage{Role: "tool", ToolCallID: tc.ID,
					Content: fmt.Sprintf("not run: at most %d tool calls per answer; ask again for what you still need", l.lim.ToolCallsPerStep)})
				continue
			}
			if l.calls >= l.lim.ToolCalls {
				return l.help(fmt.Sprintf("tool call limit: %d calls without finishing", l.lim.ToolCalls))
			}
			if set := l.skills.Tools; set.Permitted(tc.Name) && !set.Loaded(tc.Name) {
				l.msgs = append(l.msgs, schemas.LLMMessage{Role: "tool", ToolCallID: tc.ID, Content: fmt.Sprintf(
					"not run: %s is not loaded. Call %s with {\"tools\": [%q]} first; its schema comes with your next request.",
					tc.Name, skills.RequestTools, tc.Name)})
				continue
			}
			text, err := l.tool(ctx, step, i, tc)
			if err != nil {
				return nil, err
			}
			l.msgs = append(l.msgs, schemas.LLMMessage{Role: "tool", ToolCallID: tc.ID, Content: toolloop.Cut(text, l.lim.ToolOutput)})
			if l.strikes >= l.lim.Strikes {
				return l.help(fmt.Sprintf("%d tool calls in a row failed", l.strikes))
			}
		}
	}
}

// handoff hands the pipeline of an Engineer whose conversation filled its
// handoff share to a new pipeline (seed L27898-28032): a checkpoint of its
// state, and a pipeline_handoff_request in place of the stage's result. A
// handoff that cannot be made (no pipeline: a prompt node; a chain the user
// stopped or at its cap; the state not written) falls back to summarise and
// compact, the reason recorded in the
// memory_compacted event; nil events mean the loop goes on.
func (l *loop) handoff(ctx context.Context, usage float64, specs []tools.ToolSpec) ([]*schemas.Envelope, error) {
	reason := fmt.Sprintf("%s_context_%d%%", l.d.Agent, int(usage*100))
	if l.stage == nil || l.stage.Stage != schemas.StageImplement {
		return nil, l.compactInstead(ctx, specs, reason+": no pipeline to hand off to (a prompt node, not a pipeline's Engineer stage)")
	}
	why, err := l.handoffRefusal(ctx)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, l.compactInstead(ctx, specs, reason+": no handoff: "+why)
	}
	id, cp, err := l.mem.Checkpoint(ctx, l.msgs, specs)
	if err != nil {
		if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
			return nil, err // transient: the delivery is tried again
		}
		return nil, l.compactInstead(ctx, specs, reason+": the handoff state could not be written: "+err.Error())
	}
	e, err := l.d.Derive(schemas.TypePipelineHandoffRequest, "pipeline", "stage-result", schemas.PipelineHandoffRequest{
		PipelineID: l.stage.PipelineID, Stage: l.stage.Stage, Loop: l.stage.Loop, Reason: reason, ContextUsage: usage,
		Checkpoint: id, Engineer: cp.Engineer, Summary: cp.Text})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{e}, nil
}

// Pipelines reads a pipeline: *projections.Store.
type Pipelines interface {
	Pipeline(ctx context.Context, id string) (*projections.Pipeline, error)
}

// handoffRefusal says why the stage's pipeline may not be handed off ("" if
// it may), as its record says now: a stop the user sent while the Engineer
// worked counts.
func (l *loop) handoffRefusal(ctx context.Context) (string, error) {
	if l.p.Pipelines == nil {
		return "", nil
	}
	pl, err := l.p.Pipelines.Pipeline(ctx, l.stage.PipelineID)
	if err != nil {
		return "", agents.Transient(fmt.Errorf("read pipeline %s before its handoff: %w", l.stage.PipelineID, err), 0)
	}
	return pl.HandoffRefusal(), nil
}

// compactInstead is the fallback of a handoff: summarise, hand the summary
// to the Archivalist and compact. When even the summary cannot be had the
// loop goes on and Fit leaves a note of what it cut, as for any agent.
func (l *loop) compactInstead(ctx context.Context, specs []tools.ToolSpec, reason string) error {
	msgs, err := l.mem.Compact(ctx, l.msgs, specs, reason)
	if err != nil {
		if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
			return err
		}
		return nil
	}
	l.msgs, l.seen = msgs, 0
	return nil
}

func (l *loop) task() hooks.Task { return hooks.Task{DAGID: l.node.DAGID, NodeID: l.node.NodeID} }

// complete makes one model call, recorded, with the conversation the
// pre_prompt hooks left.
func (l *loop) complete(ctx context.Context, key string, msgs []schemas.LLMMessage, specs []tools.ToolSpec) (schemas.LLMResponse, error) {
	seen := l.seen
	if msgs[0].Content != l.sent {
		seen, l.sent = 0, msgs[0].Content
	}
	resp, _, err := l.p.LLM.Complete(ctx, l.d, llm.Request{Key: key, Messages: msgs, Seen: seen, Tools: specs,
		DAGID: l.node.DAGID, NodeID: l.node.NodeID})
	return resp, err
}

// tool runs one tool call of the model between the tool hooks, recorded, and
// returns the text the model sees; arguments that are not a JSON object fail
// without running anything.
func (l *loop) tool(ctx context.Context, step, i int, tc schemas.LLMToolCall) (string, error) {
	l.calls++
	var args map[string]any
	if err := json.Unmarshal([]byte(orEmpty(tc.Arguments)), &args); err != nil || args == nil {
		res := schemas.ToolResult{Tool: tc.Name, ExitCode: -1, Error: fmt.Sprintf("the arguments of %s are not a JSON object: %s", tc.Name, toolloop.Cut(tc.Arguments, 200))}
		l.record(tc.Name, res)
		return toolloop.ToolText(res), nil
	}
	key := fmt.Sprintf("%s/%d/step/%d/tool/%d", l.node.NodeID, l.node.Attempt, step, i)
	res, text, err := l.p.Hooks.Tool(ctx, l.d, key, l.task(), tc.Name, args, func(ctx context.Context, args map[string]any) (schemas.ToolResult, error) {
		var obs agents.ToolObserver
		if l.d.Agent == "tester" && tc.Name == tools.ToolExec {
			args = GoTestJSON(args)
			obs = CountTests(l.node)
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return schemas.ToolResult{}, agents.Permanent(err)
		}
		call := tools.Call{ID: tools.CallID(l.d.Env.ID, l.node.NodeID, "prompt", fmt.Sprint(step), fmt.Sprint(i)), Tool: tc.Name, Args: raw}
		where := agents.ToolWhere{DAGID: l.node.DAGID, NodeID: l.node.NodeID, Attempt: l.node.Attempt}
		if tc.Name == skills.RequestTools {
			return l.skills.RequestTools(ctx, l.p.Records, call, where)
		}
		runner, err := l.runner(ctx, tc.Name)
		if err != nil {
			return schemas.ToolResult{}, err
		}
		// The user is asked only about an exec plan mode would let run.
		if g, ok := runner.(*planguard.Guarded); ok && tc.Name == tools.ToolExec && l.p.Permits != nil && g.Check(call) == nil {
			denied, err := l.permit(ctx, key, &call, where)
			if err != nil {
				return schemas.ToolResult{}, err
			}
			if denied != nil {
				return *denied, nil
			}
		}
		res, _, err := l.d.RunToolObserved(ctx, runner, l.p.Records, call, where, obs)
		return res, err
	}, toolloop.ToolText)
	if err != nil {
		return "", err
	}
	if c, ok := RecordedCounts(res); ok {
		l.counts = &c
	}
	if path, ok := args["path"].(string); ok && res.OK && (tc.Name == tools.ToolWriteFile || tc.Name == tools.ToolEditFile) && !slices.Contains(l.written, path) {
		l.written = append(l.written, path)
	}
	l.record(tc.Name, res)
	return text, nil
}

// runner is what runs a tool call of the model: the consult tool's runner
// for a consult_<agent> call, otherwise the executor, read-only while the
// session is in plan mode (read before the call is recorded).
func (l *loop) runner(ctx context.Context, tool string) (agents.ToolRunner, error) {
	if l.p.Consult != nil {
		if x := l.p.Consult.Runner(l.d, tool); x != nil {
			return x, nil
		}
	}
	guarded, err := planguard.Wrap(ctx, l.exec, l.p.Plans, l.d.Env.SessionID)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	return guarded, nil
}

// permit asks the gate about an exec call whose result is not recorded yet,
// waiting for the user at most until the node's time limit: an allowed call
// is marked permitted, a denied one returns the result the model is shown
// and records the denial as an audit record.
func (l *loop) permit(ctx context.Context, key string, call *tools.Call, where agents.ToolWhere) (*schemas.ToolResult, error) {
	switch _, _, err := l.p.Records.ToolResult(ctx, call.ID); {
	case err == nil:
		return nil, nil // it ran: RunTool reuses the record
	case !errors.Is(err, projections.ErrNotFound):
		return nil, agents.Transient(fmt.Errorf("look up recorded result of %s: %w", call.ID, err), 0)
	}
	wait, cancel := context.WithDeadline(ctx, l.deadline)
	defer cancel()
	dec, err := l.p.Permits.Exec(wait, l.d, key, *call, where)
	if err != nil && ctx.Err() == nil && wait.Err() != nil {
		dec, err = permit.Decision{Reason: "no decision from the user before the task's time limit"}, nil
	}
	if err != nil {
		return nil, err
	}
	if dec.Allowed {
		call.Permitted = dec.Source != permit.SourceAllowList
		return nil, nil
	}
	rec, err := l.d.Derive(schemas.TypeAuditRecord, "user", "denied/"+call.ID, schemas.AuditRecord{
		Category: schemas.AuditPermission, Action: call.Tool, Target: dec.Target, Outcome: schemas.OutcomeDenied, Reason: dec.Reason,
		Details: map[string]string{"source": dec.Source, "request": dec.Request, "call": call.ID},
	})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if _, err := l.d.AppendNow(ctx, rec); err != nil {
		return nil, err
	}
	return &schemas.ToolResult{CallID: call.ID, Tool: call.Tool, ExitCode: -1, Error: "permission denied: " + dec.Reason}, nil
}

func (l *loop) record(name string, res schemas.ToolResult) {
	line := fmt.Sprintf("%s: %s", name, summary(res))
	l.done = append(l.done, line)
	if res.OK {
		l.okCalls++
		l.strikes = 0
		return
	}
	l.strikes++
	l.failures = append(l.failures, line)
}

func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

// verdict is a reviewer's final answer.
type verdict struct {
	Passed  *bool    `json:"passed"`
	Summary string   `json:"summary"`
	Issues  []string `json:"issues"`
}

func parseVerdict(content string) (verdict, bool) {
	var v verdict
	i, j := strings.IndexByte(content, '{'), strings.LastIndexByte(content, '}')
	if i < 0 || j < i || json.Unmarshal([]byte(content[i:j+1]), &v) != nil || v.Passed == nil {
		return v, false
	}
	return v, true
}

// review turns a reviewer's verdict into the outcome: a pass needs evidence
// from the tools, and for the Tester tests that ran and none that failed.
func (l *loop) review(v verdict, ok bool, content string) ([]*schemas.Envelope, error) {
	passed := ok && *v.Passed
	summ := strings.TrimSpace(v.Summary)
	if !ok {
		summ = "no verdict: the answer was not the JSON verdict: " + toolloop.Cut(strings.TrimSpace(content), 300)
	}
	switch {
	case passed && l.okCalls == 0:
		passed, summ = false, "no evidence: the verdict was given without a tool that ran successfully ("+summ+")"
	case l.d.Agent == "tester" && passed && (l.counts == nil || l.counts.Total() == 0):
		passed, summ = false, "no test evidence: no test run reported results ("+summ+")"
	case l.d.Agent == "tester" && passed && (l.counts.Failed > 0 || len(l.counts.BuildFailed) > 0):
		passed, summ = false, fmt.Sprintf("the verdict says passed but the tests say %d failed (%s)", l.counts.Failed, summ)
	}
	evidence := l.evidence()
	out := Verdict{OK: passed, Summary: summ, Evidence: evidence, Issues: v.Issues}
	if l.d.Agent == "tester" {
		r := schemas.TestResults{DAGID: l.node.DAGID, NodeID: l.node.NodeID, Evidence: evidence}
		if c := l.counts; c != nil {
			r.Passed, r.Failed, r.Skipped, r.FailedTests = c.Passed, c.Failed, c.Skipped, c.FailedTests
			out.Summary = fmt.Sprintf("%d passed, %d failed, %d skipped; %s", c.Passed, c.Failed, c.Skipped, summ)
		}
		out.Extra = []Extra{{Type: schemas.TypeTestResults, Payload: r}}
	} else {
		out.Extra = []Extra{{Type: schemas.TypeValidationResult, Payload: schemas.ValidationResult{
			DAGID: l.node.DAGID, NodeID: l.node.NodeID, Passed: passed, Issues: v.Issues, Evidence: evidence,
		}}}
	}
	return l.finish(out)
}

// help stops the node: a task_help with the failures and the progress, and a
// task_failed that the DAG's retry policy does not retry.
func (l *loop) help(reason string) ([]*schemas.Envelope, error) {
	h := schemas.TaskHelp{DAGID: l.node.DAGID, NodeID: l.node.NodeID, Attempt: l.node.Attempt, Reason: reason, Failures: l.failures}
	if len(l.failures) == 0 {
		h.Failures = lastN(l.done, 10)
	}
	return l.finish(Verdict{
		Summary:  "stopped, needs help: " + reason,
		Evidence: l.evidence(),
		Extra:    []Extra{{Type: schemas.TypeTaskHelp, Payload: h, Target: "orchestrator"}},
	})
}

// llmFailed ends the node on an LLM error that will not go away (a budget, a
// refusal); other errors go back to the runner, whose redelivery replays the
// recorded steps for free.
func (l *loop) llmFailed(ctx context.Context, err error) ([]*schemas.Envelope, error) {
	if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
		return nil, err
	}
	what := "the LLM call failed"
	switch {
	case errors.Is(err, llm.ErrBudgetExceeded):
		what = "the LLM budget is spent"
	case errors.Is(err, hooks.ErrBlocked):
		what = "a hook stopped the LLM call"
	}
	return l.finish(Verdict{Summary: fmt.Sprintf("%s: %v", what, err), Evidence: l.evidence()})
}

func (l *loop) evidence() string {
	s := strings.Join(l.done, "\n")
	const max = 4000
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}

func lastN(xs []string, n int) []string {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

// task is the first user message of a node.
func task(node *schemas.TaskDispatch) string {
	return fmt.Sprintf("Task %s of workflow %s (attempt %d):\n%s", node.NodeID, node.DAGID, node.Attempt, node.Prompt)
}

func (p *PromptLoop) system(agent string) string {
	if s, ok := p.Prompts[agent]; ok {
		return s
	}
	const style = "Be direct and concrete. No flattery, no filler. Base every claim on evidence from the tools, and say when you do not know."
	const verdictFmt = `When you are done, reply without a tool call with your verdict as one JSON object:
{"passed": true or false, "summary": "one paragraph", "issues": ["path/file.go:12: what is wrong", "..."]}`
	switch agent {
	case "inspector":
		return "You are the Inspector of Sylk. You review the work done in the project in your work directory against the task, " +
			"with read-only tools and checks you can run (build, vet, format, linters, tests). You do not change files. " +
			style + "\n" + verdictFmt + "\nPass only what the evidence supports."
	case "tester":
		return "You are the Tester of Sylk. You write and run the tests the task asks for in the project in your work directory. " +
			"Run go tests with the exec tool (their results are counted from the output, not from your words). " +
			style + "\n" + verdictFmt + "\nPass only if the tests ran and none failed."
	}
	return "You are the Engineer of Sylk. You carry out one task in the project in your work directory with the tools you are given. " +
		"Read before you write, make the smallest change that does the task, follow the code's existing patterns, and build and run " +
		"the tests that cover your change. " + style + "\nWhen the task is done, reply without a tool call: what you changed (files) " +
		"and how you verified it. If it cannot be done, say why."
}
