package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/schemas"
)

// PipelineState is where a single-worker pipeline is.
type PipelineState string

// Pipeline states. A running pipeline is at one of its stages; one that used
// its loops waits for the user (ignore the findings, or fail).
const (
	PipelineRunning      PipelineState = "running"
	PipelineAwaitingUser PipelineState = "awaiting_user"
	PipelineCompleted    PipelineState = "completed"
	PipelineFailed       PipelineState = "failed"
	// PipelineHandedOff: its Engineer's window filled and a new pipeline
	// (HandoffTo) carries the node on.
	PipelineHandedOff PipelineState = "handed_off"
)

// Done reports whether the pipeline has ended.
func (s PipelineState) Done() bool {
	return s == PipelineCompleted || s == PipelineFailed || s == PipelineHandedOff
}

// Pipeline is one single-worker pipeline of a DAG node (seed L25647-25750).
type Pipeline struct {
	ID             string        `json:"id"`
	Session        string        `json:"session"`
	DAG            string        `json:"dag"`
	Node           string        `json:"node"`
	Attempt        int           `json:"attempt"`
	Mode           string        `json:"mode"`
	Agent          string        `json:"agent"`
	Prompt         string        `json:"prompt"`
	WorkDir        string        `json:"work_dir,omitempty"`
	StartingCommit string        `json:"starting_commit,omitempty"`
	MaxLoops       int           `json:"max_loops"`
	State          PipelineState `json:"state"`
	// Stage and Loop are the stage last dispatched and its loop (from 1).
	Stage string `json:"stage"`
	Loop  int    `json:"loop"`
	// Waiting are the stages dispatched whose results have not come.
	Waiting []string              `json:"waiting,omitempty"`
	Stages  []PipelineStageRecord `json:"stages,omitempty"`
	// Criteria are the Inspector's acceptance criteria; Tests the Tester's
	// report of the tests it wrote (tdd).
	Criteria string             `json:"criteria,omitempty"`
	Tests    string             `json:"tests,omitempty"`
	Feedback []PipelineFeedback `json:"feedback,omitempty"`
	// FilesChanged are the files the pipeline's agents wrote (for a
	// variant, once it completed, the files that differ from the starting
	// commit).
	FilesChanged []string `json:"files_changed,omitempty"`
	// UserMessages are the /task messages; the first Delivered of them were
	// handed to the Engineer.
	UserMessages    []PipelineUserMessage `json:"user_messages,omitempty"`
	Delivered       int                   `json:"delivered,omitempty"`
	IgnoreInspector bool                  `json:"ignore_inspector,omitempty"`
	IgnoreTester    bool                  `json:"ignore_tester,omitempty"`
	// Findings are what was left when the loops ran out.
	Findings  []string `json:"findings,omitempty"`
	Summary   string   `json:"summary,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Ignored   bool     `json:"ignored,omitempty"`
	EndCommit string   `json:"end_commit,omitempty"`
	// Group and Variant place a variant's pipeline (or the original, once a
	// variant was asked for) in its group.
	Group    string `json:"group,omitempty"`
	Variant  string `json:"variant,omitempty"`
	Approach string `json:"approach,omitempty"`
	// A pipeline handed on: HandoffTo names its successor. One started by a
	// handoff: HandoffFrom its predecessor, Handoff the state it starts from.
	HandoffTo   string                   `json:"handoff_to,omitempty"`
	HandoffFrom string                   `json:"handoff_from,omitempty"`
	Handoff     *schemas.PipelineHandoff `json:"handoff,omitempty"`
	// MaxHandoffs caps the chain of handoffs (0: no cap); HandoffsStopped
	// says why the user stopped it (a chain's pipelines carry both on).
	MaxHandoffs     int        `json:"max_handoffs,omitempty"`
	HandoffsStopped string     `json:"handoffs_stopped,omitempty"`
	Seq             uint64     `json:"seq"`
	EndSeq          uint64     `json:"end_seq,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// PipelineStageRecord is one dispatched stage and its result.
type PipelineStageRecord struct {
	Stage     string                 `json:"stage"`
	Loop      int                    `json:"loop"`
	Agent     string                 `json:"agent"`
	Seq       uint64                 `json:"seq"`
	ResultSeq uint64                 `json:"result_seq,omitempty"`
	Passed    bool                   `json:"passed,omitempty"`
	Summary   string                 `json:"summary,omitempty"`
	Issues    []string               `json:"issues,omitempty"`
	Evidence  string                 `json:"evidence,omitempty"`
	Tests     *schemas.PipelineTests `json:"tests,omitempty"`
}

// PipelineFeedback is what a validator sent back to the Engineer.
type PipelineFeedback struct {
	Loop     int      `json:"loop"`
	From     string   `json:"from"`
	Summary  string   `json:"summary"`
	Issues   []string `json:"issues,omitempty"`
	Evidence string   `json:"evidence,omitempty"`
	Seq      uint64   `json:"seq"`
}

// PipelineUserMessage is a /task message to a pipeline.
type PipelineUserMessage struct {
	Seq  uint64       `json:"seq"`
	Type schemas.Type `json:"type"`
	Text string       `json:"text,omitempty"`
}

// Result finds the record of a stage of a loop.
func (p *Pipeline) Result(stage string, loop int) *PipelineStageRecord {
	for i := range p.Stages {
		if p.Stages[i].Stage == stage && p.Stages[i].Loop == loop {
			return &p.Stages[i]
		}
	}
	return nil
}

// EngineerMessages are the /task messages meant for the Engineer (prompts
// and questions), in order: the first Delivered of them reached it.
func (p *Pipeline) EngineerMessages() []PipelineUserMessage {
	var out []PipelineUserMessage
	for _, m := range p.UserMessages {
		if m.Type == schemas.TypeUserTaskPrompt || m.Type == schemas.TypeUserTaskQuery {
			out = append(out, m)
		}
	}
	return out
}

// Carry gives a pipeline started by a handoff what it inherits from prev,
// the one it continues: the /task messages prev's Engineer was not given
// yet, the validators the user waived, and the chain's cap and stop.
func (p *Pipeline) Carry(prev *Pipeline) {
	msgs := prev.EngineerMessages()
	p.UserMessages = slices.Clone(msgs[min(prev.Delivered, len(msgs)):])
	p.IgnoreInspector, p.IgnoreTester = prev.IgnoreInspector, prev.IgnoreTester
	p.HandoffsStopped = prev.HandoffsStopped
}

// HandoffRefusal says why the pipeline's Engineer may not hand it off ("" if
// it may): the user stopped the chain, or the chain made its MaxHandoffs.
func (p *Pipeline) HandoffRefusal() string {
	made := 0
	if p.Handoff != nil {
		made = p.Handoff.HandoffIndex
	}
	switch {
	case p.HandoffsStopped != "":
		return "the user stopped the chain of handoffs (" + p.HandoffsStopped + ")"
	case p.MaxHandoffs > 0 && made >= p.MaxHandoffs:
		return fmt.Sprintf("the chain made its %d handoffs (the cap)", p.MaxHandoffs)
	}
	return ""
}

// VariantGroupState is where a variant group is (seed L26356-26372).
type VariantGroupState string

// Variant group states: active while a variant runs; pending once all ended
// and one is ready; selected; cancelled when none is ready.
const (
	GroupActive    VariantGroupState = "active"
	GroupPending   VariantGroupState = "pending"
	GroupSelected  VariantGroupState = "selected"
	GroupCancelled VariantGroupState = "cancelled"
)

// VariantState is where one variant is (seed L26374-26392).
type VariantState string

// Variant states.
const (
	VariantRunning   VariantState = "running"
	VariantReady     VariantState = "ready"
	VariantSelected  VariantState = "selected"
	VariantDiscarded VariantState = "discarded"
	VariantCancelled VariantState = "cancelled"
	VariantFailed    VariantState = "failed"
)

// VariantGroup is a node's competing pipelines from one starting commit.
type VariantGroup struct {
	ID             string            `json:"id"`
	Session        string            `json:"session"`
	DAG            string            `json:"dag"`
	Node           string            `json:"node"`
	StartingCommit string            `json:"starting_commit"`
	State          VariantGroupState `json:"state"`
	Variants       []Variant         `json:"variants"`
	Selected       string            `json:"selected,omitempty"`
	Seq            uint64            `json:"seq"`
	CreatedAt      time.Time         `json:"created_at"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
}

// Variant is one pipeline of a group.
type Variant struct {
	ID       string       `json:"id"`
	Approach string       `json:"approach,omitempty"`
	Pipeline string       `json:"pipeline"`
	Worktree string       `json:"worktree,omitempty"`
	State    VariantState `json:"state"`
	Error    string       `json:"error,omitempty"`
	// EndCommit is the commit of the variant's work at its end.
	EndCommit string `json:"end_commit,omitempty"`
	// Request is the id of the variant_request that made it.
	Request string `json:"request,omitempty"`
}

// Variant finds a variant of the group.
func (g *VariantGroup) Variant(id string) *Variant {
	for i := range g.Variants {
		if g.Variants[i].ID == id {
			return &g.Variants[i]
		}
	}
	return nil
}

// CannotSelect says why variant id cannot be selected, or "": only a ready
// variant of a pending group can.
func (g *VariantGroup) CannotSelect(id string) string {
	v := g.Variant(id)
	var ready []string
	for _, x := range g.Variants {
		if x.State == VariantReady {
			ready = append(ready, x.ID)
		}
	}
	switch {
	case v == nil:
		return fmt.Sprintf("group %s has no variant %q (ready: %s)", g.ID, id, strings.Join(ready, ", "))
	case g.State != GroupPending:
		return fmt.Sprintf("group %s is %s: a variant is selected once every variant has ended", g.ID, g.State)
	case v.State == VariantFailed:
		return fmt.Sprintf("variant %s failed (%s): select a ready one (%s)", id, v.Error, strings.Join(ready, ", "))
	case v.State != VariantReady:
		return fmt.Sprintf("variant %s is %s: select a ready one (%s)", id, v.State, strings.Join(ready, ", "))
	}
	return ""
}

// PipelineFilter selects pipelines; empty fields select all.
type PipelineFilter struct {
	Session string        `json:"session,omitempty"`
	DAG     string        `json:"dag,omitempty"`
	Node    string        `json:"node,omitempty"`
	State   PipelineState `json:"state,omitempty"`
}

// Pipeline returns a pipeline by id.
func (s *Store) Pipeline(ctx context.Context, id string) (*Pipeline, error) {
	return getJSON[Pipeline](s, pipelineKey(id), "pipeline", id)
}

// Pipelines lists the pipelines f selects, in the order they started.
func (s *Store) Pipelines(ctx context.Context, f PipelineFilter) ([]*Pipeline, error) {
	all, err := scanJSON[Pipeline](s, []byte(pipelinePrefix))
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(p *Pipeline) bool {
		return (f.Session != "" && p.Session != f.Session) || (f.DAG != "" && p.DAG != f.DAG) ||
			(f.Node != "" && p.Node != f.Node) || (f.State != "" && p.State != f.State)
	})
	slices.SortFunc(all, func(a, b *Pipeline) int { return int(a.Seq) - int(b.Seq) })
	return all, nil
}

// VariantGroup returns a variant group by id.
func (s *Store) VariantGroup(ctx context.Context, id string) (*VariantGroup, error) {
	return getJSON[VariantGroup](s, groupKey(id), "variant group", id)
}

// VariantGroups lists the variant groups f selects (its State is ignored),
// in the order they were created.
func (s *Store) VariantGroups(ctx context.Context, f PipelineFilter) ([]*VariantGroup, error) {
	all, err := scanJSON[VariantGroup](s, []byte(groupPrefix))
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(g *VariantGroup) bool {
		return (f.Session != "" && g.Session != f.Session) || (f.DAG != "" && g.DAG != f.DAG) || (f.Node != "" && g.Node != f.Node)
	})
	slices.SortFunc(all, func(a, b *VariantGroup) int { return int(a.Seq) - int(b.Seq) })
	return all, nil
}

func getJSON[T any](s *Store, k []byte, what, id string) (*T, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	// One read needs no snapshot: the pipeline agent reads its pipeline at
	// every step.
	v, err := s.get(k)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound(what, id)
	}
	out := new(T)
	if err := json.Unmarshal(v, out); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", what, id, err)
	}
	return out, nil
}

func scanJSON[T any](s *Store, prefix []byte) ([]*T, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var out []*T
	err = scanPrefix(snap, prefix, func(k, v []byte) error {
		x := new(T)
		if err := json.Unmarshal(v, x); err != nil {
			return fmt.Errorf("decode %q: %w", k, err)
		}
		out = append(out, x)
		return nil
	})
	return out, err
}
