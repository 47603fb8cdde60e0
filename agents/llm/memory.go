package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Policy is how an agent keeps its conversation within its context window
// (seed L26773-26837): a typed checkpoint at each share in Checkpoints, and
// from Compact on the old turns replaced by a checkpoint's summary. An agent
// with Handoff hands its work to a fresh pipeline at that share instead of
// compacting (the pipelines do that; when a handoff fails they fall back to
// Memory.Compact).
type Policy struct {
	Checkpoints []float64
	Compact     float64
	Handoff     float64
	// Kind is the checkpoint's summary (schemas.Memory*), also its
	// Archivalist category.
	Kind string
}

// policies are the seed's table (L26773), with the Designer's handoff
// (L28048).
var policies = map[string]Policy{
	"librarian": {Checkpoints: []float64{0.25, 0.50, 0.75}, Compact: 0.75, Kind: schemas.MemoryCodebase},
	"guide":     {Checkpoints: []float64{0.50, 0.75, 0.90}, Compact: 0.95, Kind: schemas.MemoryRouting},
	"academic":  {Checkpoints: []float64{0.85}, Compact: 0.95, Kind: schemas.MemoryResearch},
	"architect": {Checkpoints: []float64{0.85}, Compact: 0.95, Kind: schemas.MemoryWorkflow},
	"inspector": {Checkpoints: []float64{0.85}, Compact: 0.95, Kind: schemas.MemoryFindings},
	"tester":    {Checkpoints: []float64{0.85}, Compact: 0.95, Kind: schemas.MemoryTests},
	"engineer":  {Handoff: 0.95, Kind: schemas.MemoryEngineer},
	"designer":  {Handoff: 0.95, Kind: schemas.MemoryEngineer},
}

// PolicyFor is agent's context policy; an agent the seed does not list
// checkpoints and compacts like the Architect.
func PolicyFor(agent string) Policy {
	if p, ok := policies[agent]; ok {
		return p
	}
	return Policy{Checkpoints: []float64{0.85}, Compact: 0.95, Kind: schemas.MemoryWorkflow}
}

// Memory keeps one conversation of an agent within its policy. Make one per
// conversation (per delivery) and call Keep before each model call: its
// decisions are a function of the conversation, so a redelivery that replays
// the conversation makes the same ones, reuses the recorded summaries and
// appends nothing new.
type Memory struct {
	c      *Client
	d      *agents.Delivery
	key    string
	dag    string
	node   string
	policy Policy

	n     int // checkpoints written
	taken int // thresholds crossed since the last compaction
}

// Memory is the memory of the conversation named key (the prefix of its
// calls' keys) of d's agent, attributed to a DAG node if dag is set.
func (c *Client) Memory(d *agents.Delivery, key, dag, node string) *Memory {
	return &Memory{c: c, d: d, key: key, dag: dag, node: node, policy: PolicyFor(d.Agent)}
}

// Keep returns the conversation to send next and whether it changed. When the
// conversation crosses one of the policy's shares it writes a checkpoint
// (memory_checkpoint, to the Archivalist); from the compaction share on it
// replaces the old turns by a checkpoint's summary (memory_compacted). What
// still does not fit goes through Fit, under callKey.
func (m *Memory) Keep(ctx context.Context, callKey string, msgs []schemas.LLMMessage, specs []tools.ToolSpec) ([]schemas.LLMMessage, bool, error) {
	usage := m.usage(msgs, specs)
	crossed := 0
	for _, p := range m.policy.Checkpoints {
		if usage >= p {
			crossed++
		}
	}
	var cp *checkpoint
	if crossed > m.taken {
		m.taken = crossed
		var err error
		if cp, err = m.checkpoint(ctx, msgs, usage); err != nil {
			return nil, false, err
		}
	}
	changed := false
	if m.policy.Compact > 0 && usage >= m.policy.Compact {
		out, err := m.compact(ctx, msgs, specs, usage, cp, "")
		if err != nil {
			return nil, false, err
		}
		msgs, changed = out, true
	}
	fitted, fit, err := m.c.Fit(ctx, m.d, FitRequest{Key: callKey, Messages: msgs, Tools: specs, DAGID: m.dag, NodeID: m.node})
	if err != nil {
		return nil, false, err
	}
	return fitted, changed || fit, nil
}

// HandoffDue reports the share of the window msgs and specs fill, and
// whether the agent's policy hands its work off at that share.
func (m *Memory) HandoffDue(msgs []schemas.LLMMessage, specs []tools.ToolSpec) (float64, bool) {
	u := m.usage(msgs, specs)
	return u, m.policy.Handoff > 0 && u >= m.policy.Handoff
}

// Checkpoint writes a checkpoint of msgs whatever the share used, and
// returns its event id and payload: the state a handoff carries.
func (m *Memory) Checkpoint(ctx context.Context, msgs []schemas.LLMMessage, specs []tools.ToolSpec) (string, schemas.MemoryCheckpoint, error) {
	cp, err := m.checkpoint(ctx, msgs, m.usage(msgs, specs))
	if err != nil {
		return "", schemas.MemoryCheckpoint{}, err
	}
	return cp.id, cp.p, nil
}

// Compact writes a checkpoint and replaces the old turns by its summary,
// whatever the share used: the Engineer's fallback when a pipeline handoff
// fails or cannot be made (seed L28021-28032), reason saying which.
func (m *Memory) Compact(ctx context.Context, msgs []schemas.LLMMessage, specs []tools.ToolSpec, reason string) ([]schemas.LLMMessage, error) {
	return m.compact(ctx, msgs, specs, m.usage(msgs, specs), nil, reason)
}

// window is the part of the model's context window a conversation may fill:
// the rest is reserved for the answer. The policy's shares are of this, so
// its compaction comes before Fit would have to cut.
func (m *Memory) window() int { return m.c.conf().MaxContextTokens - m.c.conf().ReserveTokens }

// usage is the share of the window msgs and specs fill.
func (m *Memory) usage(msgs []schemas.LLMMessage, specs []tools.ToolSpec) float64 {
	return float64(EstimateTokens(msgs, specs)) / float64(m.window())
}

// checkpoint is a written checkpoint: its event id and payload.
type checkpoint struct {
	id string
	p  schemas.MemoryCheckpoint
}

// checkpoint asks the model for the policy's typed summary of the
// conversation (a recorded call) and appends it.
func (m *Memory) checkpoint(ctx context.Context, msgs []schemas.LLMMessage, usage float64) (*checkpoint, error) {
	m.n++
	kind := m.policy.Kind
	text := render(conversationBody(msgs))
	room := max(1000, m.window()*2) // about half the window, in bytes
	resp, _, err := m.c.Complete(ctx, m.d, Request{
		Key: fmt.Sprintf("%s/checkpoint/%d", m.key, m.n), DAGID: m.dag, NodeID: m.node, JSON: true, MaxTokens: 1024,
		Messages: []schemas.LLMMessage{
			{Role: "system", Content: "You write a memory checkpoint of an agent's working conversation: a " + strings.ReplaceAll(kind, "_", " ") +
				" the agent will continue from when its old turns are dropped. Keep every fact it needs: files, commands and results, " +
				"decisions and why, what is done and what remains. Answer with one JSON object with these keys: " + summaryKeys[kind]},
			{Role: "user", Content: cutMiddle(text, room)},
		},
	})
	if err != nil {
		return nil, err
	}
	p := schemas.MemoryCheckpoint{Agent: m.d.Agent, Kind: kind, Category: kind, Key: m.key, Index: m.n, ContextUsage: usage,
		DAGID: m.dag, NodeID: m.node, Text: strings.TrimSpace(resp.Content)}
	typed(&p, jsonObjectOf(resp.Content))
	env, err := m.d.Derive(schemas.TypeMemoryCheckpoint, "archivalist", fmt.Sprintf("memory/%s/checkpoint/%d", m.key, m.n), p)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if _, err := m.d.AppendNow(ctx, env); err != nil {
		return nil, err
	}
	return &checkpoint{id: env.ID, p: p}, nil
}

// compact keeps the system messages, the task and the most recent turns
// that fit in a quarter of the window, and puts the summary of a checkpoint
// (cp, or a new one) in place of the rest.
func (m *Memory) compact(ctx context.Context, msgs []schemas.LLMMessage, specs []tools.ToolSpec, usage float64, cp *checkpoint, reason string) ([]schemas.LLMMessage, error) {
	h := headLen(msgs)
	window := m.window()
	t := len(msgs)
	for used := 0; t > h; t-- {
		n := EstimateTokens(msgs[t-1:t], nil)
		if used+n > window/4 {
			break
		}
		used += n
	}
	for t < len(msgs) && msgs[t].Role == "tool" { // a tool result follows its call
		t++
	}
	if t <= h {
		return msgs, nil // nothing old to replace
	}
	if cp == nil {
		var err error
		if cp, err = m.checkpoint(ctx, msgs, usage); err != nil {
			return nil, err
		}
	}
	out := append([]schemas.LLMMessage(nil), msgs[:h]...)
	out = append(out, schemas.LLMMessage{Role: "user", Content: fmt.Sprintf(
		"[Memory checkpoint %d replaces the %d earlier messages of this conversation; the Archivalist keeps it]\n%s", cp.p.Index, t-h, cp.p.Text)})
	out = append(out, msgs[t:]...)
	env, err := m.d.Derive(schemas.TypeMemoryCompacted, "user", fmt.Sprintf("memory/%s/compacted/%d", m.key, cp.p.Index), schemas.MemoryCompacted{
		Agent: m.d.Agent, Key: m.key, Checkpoint: cp.id, Replaced: t - h, Reason: reason,
		TokensBefore: EstimateTokens(msgs, specs), TokensAfter: EstimateTokens(out, specs), ContextLimit: window,
	})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if _, err := m.d.AppendNow(ctx, env); err != nil {
		return nil, err
	}
	m.taken = 0
	return out, nil
}

// headLen is how many leading messages stay: the system messages and the
// task (the first user message).
func headLen(msgs []schemas.LLMMessage) int {
	h := 0
	for h < len(msgs) && msgs[h].Role == "system" {
		h++
	}
	if h < len(msgs) && msgs[h].Role == "user" {
		h++
	}
	return h
}

// conversationBody is the conversation without its system messages.
func conversationBody(msgs []schemas.LLMMessage) []schemas.LLMMessage {
	h := 0
	for h < len(msgs) && msgs[h].Role == "system" {
		h++
	}
	return msgs[h:]
}

// summaryKeys describes each kind's JSON, for the model.
var summaryKeys = map[string]string{
	schemas.MemoryCodebase: `directory_structure, key_paths [], code_style, architecture, testing_strategy, tooling [], patterns [], conventions [], new_discoveries [].`,
	schemas.MemoryRouting:  `known_routings {pattern: agent}, failed_routings [], request_patterns [].`,
	schemas.MemoryResearch: `title, abstract, topics_researched [], key_findings [{topic, summary, confidence high|medium|low, sources []}], recommendations [], open_questions [].`,
	schemas.MemoryWorkflow: `original_request, implementation_plan, completed_tasks [{id, description, status, assigned_to, result}], pending_tasks [...], blocked_tasks [...], architectural_decisions [], risks [], assumptions [].`,
	schemas.MemoryFindings: `checks_performed [], issues_found, issues_resolved, issues_remaining, fixes_pending [{file, line, description, severity, suggested_fix}], validation_state {category: passed}.`,
	schemas.MemoryTests:    `tests_created [], pass_count, fail_count, skip_count, coverage_needed [], failure_descriptions [].`,
	schemas.MemoryEngineer: `original_prompt (verbatim), accomplished [], files_changed [], remaining [], context_notes.`,
}

// typed fills the checkpoint's typed summary from the model's JSON; a
// summary that does not decode keeps its text only.
func typed(p *schemas.MemoryCheckpoint, raw string) {
	if raw == "" {
		return
	}
	var target any
	switch p.Kind {
	case schemas.MemoryCodebase:
		p.Codebase = &schemas.CodebaseSummary{}
		target = p.Codebase
	case schemas.MemoryRouting:
		p.Routing = &schemas.GuideSummary{}
		target = p.Routing
	case schemas.MemoryResearch:
		p.Research = &schemas.AcademicResearchPaper{}
		target = p.Research
	case schemas.MemoryWorkflow:
		p.Workflow = &schemas.ArchitectWorkflowSummary{}
		target = p.Workflow
	case schemas.MemoryFindings:
		p.Findings = &schemas.InspectorFindingsSummary{}
		target = p.Findings
	case schemas.MemoryTests:
		p.Tests = &schemas.TesterSummary{}
		target = p.Tests
	case schemas.MemoryEngineer:
		p.Engineer = &schemas.EngineerHandoffState{}
		target = p.Engineer
	default:
		return
	}
	if json.Unmarshal([]byte(raw), target) != nil {
		p.Codebase, p.Routing, p.Research, p.Workflow, p.Findings, p.Tests, p.Engineer = nil, nil, nil, nil, nil, nil, nil
	}
}

// jsonObjectOf is the outermost {...} of s.
func jsonObjectOf(s string) string {
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return ""
	}
	return s[i : j+1]
}
