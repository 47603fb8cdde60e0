package schemas

import (
	"fmt"
	"time"
)

// Single-worker pipelines (seed L24533-25494, L25647-26025): one Engineer with
// an Inspector and a Tester of its own, looping on one DAG node until both
// validators pass.

// Pipeline modes: what a node's `pipeline:` names.
const (
	// PipelineTDD: the Inspector states acceptance criteria, the Tester writes
	// tests that fail (RED, checked by running them), the Engineer implements,
	// then the Inspector and the Tester validate side by side.
	PipelineTDD = "tdd"
	// PipelineStandard: the Engineer implements, the Inspector reviews, then
	// the Tester writes and runs the task's tests (seed L25821-25878).
	PipelineStandard = "standard"
	// PipelineReview: the Engineer implements and the Inspector reviews; no
	// tests (documentation, configuration, refactoring covered elsewhere).
	PipelineReview = "review"
)

// PipelineModes lists the modes a node may name.
func PipelineModes() []string { return []string{PipelineTDD, PipelineStandard, PipelineReview} }

// Pipeline stages.
const (
	StageCriteria  = "criteria"  // Inspector: acceptance criteria (tdd)
	StageRed       = "red"       // Tester: tests that fail before the work (tdd)
	StageImplement = "implement" // Engineer: the work
	StageInspect   = "inspect"   // Inspector: validation
	StageTest      = "test"      // Tester: validation by running tests
)

// DefaultPipelineLoops is how many implement-validate loops a pipeline makes
// before the user decides (seed L24925).
const DefaultPipelineLoops = 3

// DefaultPipelineHandoffs caps a chain of Engineer handoffs (the seed lets
// them chain without end): an Engineer whose pipeline is the chain's last
// compacts its conversation instead.
const DefaultPipelineHandoffs = 5

// PipelineStarted creates a pipeline for a dispatched node. StartingCommit is
// a commit of the work directory as it was (uncommitted changes included),
// empty outside a git repository. A variant's pipeline names its group and
// variant and runs in its own worktree.
type PipelineStarted struct {
	PipelineID     string `json:"pipeline_id"`
	DAGID          string `json:"dag_id"`
	NodeID         string `json:"node_id"`
	Attempt        int    `json:"attempt"`
	Mode           string `json:"mode"`
	Agent          string `json:"agent"`
	Prompt         string `json:"prompt"`
	WorkDir        string `json:"work_dir,omitempty"`
	StartingCommit string `json:"starting_commit,omitempty"`
	MaxLoops       int    `json:"max_loops"`
	GroupID        string `json:"group_id,omitempty"`
	VariantID      string `json:"variant_id,omitempty"`
	Approach       string `json:"approach,omitempty"`
	// Handoff is the state a pipeline started by a handoff continues from
	// (its first stage is the Engineer's, at the old pipeline's loop).
	Handoff *PipelineHandoff `json:"handoff,omitempty"`
	// MaxHandoffs caps the chain of handoffs the pipeline starts or
	// continues (0: no cap, as before it was recorded).
	MaxHandoffs int `json:"max_handoffs,omitempty"`
}

// PipelineStage asks an agent to do one stage of a pipeline.
type PipelineStage struct {
	PipelineID string        `json:"pipeline_id"`
	DAGID      string        `json:"dag_id"`
	NodeID     string        `json:"node_id"`
	Attempt    int           `json:"attempt"`
	Stage      string        `json:"stage"`
	Loop       int           `json:"loop"`
	Agent      string        `json:"agent"`
	Prompt     string        `json:"prompt"`
	WorkDir    string        `json:"work_dir,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
	// UserMessages counts the /task messages this stage hands the Engineer.
	UserMessages int `json:"user_messages,omitempty"`
}

// PipelineTests is a test run's evidence, parsed from its output.
type PipelineTests struct {
	Passed      int      `json:"passed"`
	Failed      int      `json:"failed"`
	Skipped     int      `json:"skipped"`
	FailedTests []string `json:"failed_tests,omitempty"`
	BuildFailed []string `json:"build_failed,omitempty"`
}

// PipelineStageResult is an agent's report of one stage.
type PipelineStageResult struct {
	PipelineID   string         `json:"pipeline_id"`
	Stage        string         `json:"stage"`
	Loop         int            `json:"loop"`
	Passed       bool           `json:"passed"`
	Summary      string         `json:"summary"`
	Evidence     string         `json:"evidence,omitempty"`
	Issues       []string       `json:"issues,omitempty"`
	Tests        *PipelineTests `json:"tests,omitempty"`
	FilesChanged []string       `json:"files_changed,omitempty"`
}

// InspectorFeedback is the Inspector's findings sent back to the Engineer
// (seed L25999-26004: INSPECTOR_FEEDBACK).
type InspectorFeedback struct {
	PipelineID string   `json:"pipeline_id"`
	Loop       int      `json:"loop"`
	Summary    string   `json:"summary"`
	Issues     []string `json:"issues,omitempty"`
	Evidence   string   `json:"evidence,omitempty"`
}

// TesterFeedback is the Tester's failures sent back to the Engineer
// (TESTER_FEEDBACK).
type TesterFeedback struct {
	PipelineID  string   `json:"pipeline_id"`
	Loop        int      `json:"loop"`
	Summary     string   `json:"summary"`
	TestsRun    int      `json:"tests_run"`
	TestsPassed int      `json:"tests_passed"`
	Failures    []string `json:"failures,omitempty"`
	Evidence    string   `json:"evidence,omitempty"`
}

// PipelineAwaitingUser says a pipeline used its loops and waits for the user
// to ignore the findings or fail the node.
type PipelineAwaitingUser struct {
	PipelineID string   `json:"pipeline_id"`
	Loops      int      `json:"loops"`
	Reason     string   `json:"reason"`
	Findings   []string `json:"findings,omitempty"`
}

// Pipeline decisions of the user, the answers to a pipeline awaiting them.
const (
	DecisionIgnore = "ignore"
	DecisionFail   = "fail"
)

// PipelineComplete ends a pipeline that passed (or whose findings the user
// ignored) (PIPELINE_COMPLETE). EndCommit is a commit of its work directory at
// the end; FilesChanged the files that differ from the starting commit.
type PipelineComplete struct {
	PipelineID   string   `json:"pipeline_id"`
	DAGID        string   `json:"dag_id"`
	NodeID       string   `json:"node_id"`
	Loops        int      `json:"loops"`
	Summary      string   `json:"summary"`
	Ignored      bool     `json:"ignored,omitempty"`
	EndCommit    string   `json:"end_commit,omitempty"`
	FilesChanged []string `json:"files_changed,omitempty"`
}

// PipelineFailed ends a pipeline that failed (PIPELINE_FAILED).
type PipelineFailed struct {
	PipelineID string `json:"pipeline_id"`
	DAGID      string `json:"dag_id"`
	NodeID     string `json:"node_id"`
	Loops      int    `json:"loops"`
	Reason     string `json:"reason"`
}

// UserTaskMessage is what the user says to one pipeline with /task: a prompt
// or a question for its Engineer, an interrupt, an instruction to skip a
// validator (seed L25931-25958, L26019-26025), or to stop its chain of
// handoffs (seed L28022). A message to a pipeline that was handed off goes
// to the one that carries its work on.
type UserTaskMessage struct {
	PipelineID string `json:"pipeline_id"`
	Text       string `json:"text,omitempty"`
}

// User messages to a pipeline.
type (
	UserTaskPrompt      UserTaskMessage
	UserTaskQuery       UserTaskMessage
	UserTaskInterrupt   UserTaskMessage
	UserIgnoreInspector UserTaskMessage
	UserIgnoreTester    UserTaskMessage
	UserStopHandoffs    UserTaskMessage
)

// TaskMessageOf returns the message of a decoded /task payload (a pointer to
// one of the types above), or nil.
func TaskMessageOf(v any) *UserTaskMessage {
	switch p := v.(type) {
	case *UserTaskPrompt:
		return (*UserTaskMessage)(p)
	case *UserTaskQuery:
		return (*UserTaskMessage)(p)
	case *UserTaskInterrupt:
		return (*UserTaskMessage)(p)
	case *UserIgnoreInspector:
		return (*UserTaskMessage)(p)
	case *UserIgnoreTester:
		return (*UserTaskMessage)(p)
	case *UserStopHandoffs:
		return (*UserTaskMessage)(p)
	}
	return nil
}

// NewTaskMessage returns the payload of /task message type t (one of the
// user_task_*, user_ignore_* and user_stop_handoffs types).
func NewTaskMessage(t Type, m UserTaskMessage) (any, error) {
	switch t {
	case TypeUserTaskPrompt:
		return UserTaskPrompt(m), nil
	case TypeUserTaskQuery:
		return UserTaskQuery(m), nil
	case TypeUserTaskInterrupt:
		return UserTaskInterrupt(m), nil
	case TypeUserIgnoreInspector:
		return UserIgnoreInspector(m), nil
	case TypeUserIgnoreTester:
		return UserIgnoreTester(m), nil
	case TypeUserStopHandoffs:
		return UserStopHandoffs(m), nil
	}
	return nil, fmt.Errorf("%w: %q is not a /task message", ErrUnknownType, string(t))
}

// Variants (seed L26131-26733): several pipelines for one node from one
// starting commit, each in its own git worktree; the user selects one.

// VariantRequest asks for another approach to a node.
type VariantRequest struct {
	DAGID    string `json:"dag_id"`
	NodeID   string `json:"node_id"`
	Approach string `json:"approach"`
}

// VariantGroupCreated opens a variant group for a node; the node's running
// pipeline is its first variant, "original".
type VariantGroupCreated struct {
	GroupID        string `json:"group_id"`
	DAGID          string `json:"dag_id"`
	NodeID         string `json:"node_id"`
	StartingCommit string `json:"starting_commit"`
	Original       string `json:"original"`
}

// VariantCreated adds a variant to a group.
type VariantCreated struct {
	GroupID    string `json:"group_id"`
	VariantID  string `json:"variant_id"`
	Approach   string `json:"approach"`
	PipelineID string `json:"pipeline_id"`
	Worktree   string `json:"worktree,omitempty"`
}

// VariantSelect is the user's choice of a ready variant.
type VariantSelect struct {
	GroupID   string `json:"group_id"`
	VariantID string `json:"variant_id"`
}

// VariantSelected records that the chosen variant is in the work directory
// and the other worktrees are removed.
type VariantSelected struct {
	GroupID   string   `json:"group_id"`
	VariantID string   `json:"variant_id"`
	Removed   []string `json:"removed,omitempty"`
}

// Pipeline and variant message types.
const (
	TypePipelineStarted      Type = "pipeline_started"
	TypePipelineStage        Type = "pipeline_stage"
	TypePipelineStageResult  Type = "pipeline_stage_result"
	TypeInspectorFeedback    Type = "inspector_feedback"
	TypeTesterFeedback       Type = "tester_feedback"
	TypePipelineAwaitingUser Type = "pipeline_awaiting_user"
	TypePipelineComplete     Type = "pipeline_complete"
	TypePipelineFailed       Type = "pipeline_failed"
	TypeUserTaskPrompt       Type = "user_task_prompt"
	TypeUserTaskQuery        Type = "user_task_query"
	TypeUserTaskInterrupt    Type = "user_task_interrupt"
	TypeUserIgnoreInspector  Type = "user_ignore_inspector"
	TypeUserIgnoreTester     Type = "user_ignore_tester"
	TypeUserStopHandoffs     Type = "user_stop_handoffs"
	TypeVariantRequest       Type = "variant_request"
	TypeVariantGroupCreated  Type = "variant_group_created"
	TypeVariantCreated       Type = "variant_created"
	TypeVariantSelect        Type = "variant_select"
	TypeVariantSelected      Type = "variant_selected"
)

var pipelineTypes = map[Type]typeInfo{
	TypePipelineStarted:      entry[PipelineStarted]("A single-worker pipeline starts for a node."),
	TypePipelineStage:        entry[PipelineStage]("A pipeline asks an agent to do one stage."),
	TypePipelineStageResult:  entry[PipelineStageResult]("An agent's report of one pipeline stage."),
	TypeInspectorFeedback:    entry[InspectorFeedback]("The Inspector's findings, back to the pipeline's Engineer."),
	TypeTesterFeedback:       entry[TesterFeedback]("The Tester's failures, back to the pipeline's Engineer."),
	TypePipelineAwaitingUser: entry[PipelineAwaitingUser]("A pipeline used its loops; the user ignores the findings or fails it."),
	TypePipelineComplete:     entry[PipelineComplete]("A pipeline passed (or the user ignored its findings)."),
	TypePipelineFailed:       entry[PipelineFailed]("A pipeline failed."),
	TypeUserTaskPrompt:       entry[UserTaskPrompt]("/task: a prompt for a pipeline's Engineer."),
	TypeUserTaskQuery:        entry[UserTaskQuery]("/task: a question for a pipeline's Engineer."),
	TypeUserTaskInterrupt:    entry[UserTaskInterrupt]("/task: stop a pipeline."),
	TypeUserIgnoreInspector:  entry[UserIgnoreInspector]("/task: skip a pipeline's Inspector from now on."),
	TypeUserIgnoreTester:     entry[UserIgnoreTester]("/task: skip a pipeline's Tester from now on."),
	TypeUserStopHandoffs:     entry[UserStopHandoffs]("/task: no more handoffs in a pipeline's chain; its Engineer compacts instead."),
	TypeVariantRequest:       entry[VariantRequest]("Ask for another approach to a node, as a variant."),
	TypeVariantGroupCreated:  entry[VariantGroupCreated]("A variant group opens for a node."),
	TypeVariantCreated:       entry[VariantCreated]("A variant's pipeline starts in its own worktree."),
	TypeVariantSelect:        entry[VariantSelect]("The user selects a ready variant."),
	TypeVariantSelected:      entry[VariantSelected]("The selected variant is in the work directory; the others are removed."),
}
