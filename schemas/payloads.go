package schemas

import "time"

// Payload structs, one per message type. Keys are snake_case in both msgpack and
// JSON: the codec reads the json tags.

// UserInput is a message typed by the user.
type UserInput struct {
	Text string `json:"text"`
}

// UserResponse is the user's answer to a question an agent asked.
type UserResponse struct {
	Text      string `json:"text"`
	InReplyTo string `json:"in_reply_to,omitempty"`
}

// SessionConfig is a session's limits (seed L1718-1725). Zero values mean the
// runtime defaults.
type SessionConfig struct {
	MaxConcurrentTasks int           `json:"max_concurrent_tasks,omitempty"`
	MaxEngineers       int           `json:"max_engineers,omitempty"`
	TaskTimeout        time.Duration `json:"task_timeout,omitempty"`
	SessionTimeout     time.Duration `json:"session_timeout,omitempty"`
	AutoSuspendAfter   time.Duration `json:"auto_suspend_after,omitempty"`
	EnableGitIsolation bool          `json:"enable_git_isolation,omitempty"`
	WorkDir            string        `json:"work_dir,omitempty"`
}

// SessionCreate creates the envelope's session (seed L1767-1773).
type SessionCreate struct {
	Name       string            `json:"name,omitempty"`
	BaseBranch string            `json:"base_branch,omitempty"`
	Config     SessionConfig     `json:"config"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// SessionSwitch makes the envelope's session the focused one; From, if active, is
// suspended.
type SessionSwitch struct {
	From string `json:"from,omitempty"`
}

// SessionSuspend suspends the envelope's session.
type SessionSuspend struct {
	Reason string `json:"reason,omitempty"`
}

// SessionResume resumes (or first activates) the envelope's session.
type SessionResume struct {
	Reason string `json:"reason,omitempty"`
}

// SessionComplete completes the envelope's session.
type SessionComplete struct {
	Summary string `json:"summary,omitempty"`
}

// SessionFail marks the envelope's session failed.
type SessionFail struct {
	Reason string `json:"reason"`
}

// SessionContextSet replaces the parts of the session context it names (seed
// L1685-1715); empty fields leave the current value.
type SessionContextSet struct {
	CurrentTask      string   `json:"current_task,omitempty"`
	CurrentStep      string   `json:"current_step,omitempty"`
	CurrentObjective string   `json:"current_objective,omitempty"`
	CompletedSteps   []string `json:"completed_steps,omitempty"`
	NextSteps        []string `json:"next_steps,omitempty"`
	Blockers         []string `json:"blockers,omitempty"`
	ModifiedFiles    []string `json:"modified_files,omitempty"`
	ReadFiles        []string `json:"read_files,omitempty"`
	CreatedFiles     []string `json:"created_files,omitempty"`
	UserWants        []string `json:"user_wants,omitempty"`
	UserRejects      []string `json:"user_rejects,omitempty"`
}

// Query is the shape shared by the knowledge agents' requests.
type Query struct {
	Query   string `json:"query"`
	Context string `json:"context,omitempty"`
}

// Answer is the shape shared by the knowledge agents' responses.
type Answer struct {
	Answer     string   `json:"answer"`
	References []string `json:"references,omitempty"`
	Confidence float64  `json:"confidence,omitempty"`
}

// Knowledge agents' requests and responses.
type (
	ResearchRequest Query
	ContextResponse Answer
	HistoryResponse Answer
)

// ContextRequest asks the Librarian about the code of the session's work
// directory, optionally narrowed to declarations of some kinds
// (SymbolKinds) and files of some languages (CodeLanguages).
type ContextRequest struct {
	Query   string   `json:"query"`
	Context string   `json:"context,omitempty"`
	Types   []string `json:"types,omitempty"`
	Langs   []string `json:"langs,omitempty"`
}

// HistoryRequest queries the Archivalist (the seed's ArchiveQuery, L1922-1940).
type HistoryRequest struct {
	SearchText   string    `json:"search_text,omitempty"`
	Categories   []string  `json:"categories,omitempty"`
	SessionIDs   []string  `json:"session_ids,omitempty"`
	Since        time.Time `json:"since,omitempty"`
	Until        time.Time `json:"until,omitempty"`
	Limit        int       `json:"limit,omitempty"`
	CrossSession bool      `json:"cross_session,omitempty"`
}

// StoreRequest asks the Archivalist to keep an entry.
type StoreRequest struct {
	Category string   `json:"category"`
	Content  string   `json:"content"`
	Tags     []string `json:"tags,omitempty"`
}

// HistoryEntry is what the Archivalist recorded: an outcome, failure or decision.
type HistoryEntry struct {
	Category string   `json:"category"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail,omitempty"`
	DAGID    string   `json:"dag_id,omitempty"`
	NodeID   string   `json:"node_id,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// A failure's approach signature (what was tried: the agent, the tool
	// and its arguments, or the prompt) and its normalised error pattern
	// (numbers, paths, quoted strings and hex replaced): the failure memory
	// counts the failures of the same approach with the same pattern,
	// across sessions.
	Approach     string `json:"approach,omitempty"`
	ErrorPattern string `json:"error_pattern,omitempty"`
}

// Retry is a retry policy: at most Max further attempts, waiting Backoff, doubled
// each time.
type Retry struct {
	Max     int           `json:"max,omitempty"`
	Backoff time.Duration `json:"backoff,omitempty"`
}

// Policy is how a DAG runs (seed L25498-25550).
type Policy struct {
	MaxConcurrency int   `json:"max_concurrency,omitempty"`
	FailFast       bool  `json:"fail_fast,omitempty"`
	Retry          Retry `json:"retry"`
}

// Node is one DAG node: a tool with arguments (direct tier) or a prompt (agent tier).
type Node struct {
	ID     string         `json:"id"`
	Agent  string         `json:"agent"`
	Tool   string         `json:"tool,omitempty"`
	Args   map[string]any `json:"args,omitempty"`
	Prompt string         `json:"prompt,omitempty"`
	// Skills a prompt node names (loaded whatever their tier).
	Skills    []string      `json:"skills,omitempty"`
	DependsOn []string      `json:"depends_on,omitempty"`
	Timeout   time.Duration `json:"timeout,omitempty"`
	Retry     *Retry        `json:"retry,omitempty"`
	// Pipeline runs a prompt node as a single-worker pipeline (PipelineModes).
	Pipeline string `json:"pipeline,omitempty"`
}

// DAG is a workflow plan.
type DAG struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	Policy Policy `json:"policy"`
	Nodes  []Node `json:"nodes,omitempty"`
}

// PlanRequest asks the Architect to plan a request.
type PlanRequest struct {
	Request string `json:"request"`
}

// PlanResponse is the Architect's plan, waiting for the user's approval.
type PlanResponse struct {
	PlanID    string `json:"plan_id"`
	DAG       DAG    `json:"dag"`
	Rationale string `json:"rationale,omitempty"`
	// Mode is the plan drafted in plan mode, whose steps are the DAG's nodes.
	Mode *ModePlan `json:"mode,omitempty"`
}

// PlanApproved is the user's approval of a plan.
type PlanApproved struct {
	PlanID string `json:"plan_id"`
}

// PlanModified is the user's feedback on a plan; Rejected drops it altogether.
type PlanModified struct {
	PlanID   string `json:"plan_id"`
	Feedback string `json:"feedback,omitempty"`
	Rejected bool   `json:"rejected,omitempty"`
}

// DAGExecute submits a DAG for execution. WorkDir is where its tools run (the
// submitter's project directory); empty means the server's working directory.
type DAGExecute struct {
	DAG     DAG    `json:"dag"`
	WorkDir string `json:"work_dir,omitempty"`
}

// DAGRejected lists every problem found in a submitted DAG.
type DAGRejected struct {
	DAGID    string   `json:"dag_id"`
	Problems []string `json:"problems,omitempty"`
}

// DAGStatus reports a DAG's progress.
type DAGStatus struct {
	DAGID  string         `json:"dag_id"`
	State  string         `json:"state"`
	Layer  int            `json:"layer"`
	Counts map[string]int `json:"counts,omitempty"`
}

// TaskDispatch asks an agent to run one node.
type TaskDispatch struct {
	DAGID   string         `json:"dag_id"`
	NodeID  string         `json:"node_id"`
	Attempt int            `json:"attempt"`
	Agent   string         `json:"agent"`
	Tool    string         `json:"tool,omitempty"`
	Args    map[string]any `json:"args,omitempty"`
	Prompt  string         `json:"prompt,omitempty"`
	// Skills are skills the node names for its prompt: loaded whatever
	// their tier.
	Skills  []string      `json:"skills,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
	WorkDir string        `json:"work_dir,omitempty"`
	// Pipeline is the node's pipeline mode; the dispatch then goes to the
	// pipeline agent, which runs Agent in it.
	Pipeline string `json:"pipeline,omitempty"`
	// NotBefore delays a retry: the agent waits until then before it starts.
	NotBefore time.Time `json:"not_before,omitempty"`
}

// TaskComplete reports a node that succeeded.
type TaskComplete struct {
	DAGID   string `json:"dag_id"`
	NodeID  string `json:"node_id"`
	Attempt int    `json:"attempt"`
	CallID  string `json:"call_id,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Evidence is what proves the work done (tool output, parsed test counts).
	Evidence string `json:"evidence,omitempty"`
}

// TaskFailed reports a node that failed. Retryable failures may be retried under
// the DAG's retry policy.
type TaskFailed struct {
	DAGID     string `json:"dag_id"`
	NodeID    string `json:"node_id"`
	Attempt   int    `json:"attempt"`
	CallID    string `json:"call_id,omitempty"`
	Error     string `json:"error"`
	Retryable bool   `json:"retryable,omitempty"`
	Evidence  string `json:"evidence,omitempty"`
}

// TaskHelp says an agent cannot finish a node without help (the 3-strike rule).
type TaskHelp struct {
	DAGID    string   `json:"dag_id"`
	NodeID   string   `json:"node_id"`
	Attempt  int      `json:"attempt"`
	Reason   string   `json:"reason"`
	Failures []string `json:"failures,omitempty"`
}

// NodeSkipped says a node will not run.
type NodeSkipped struct {
	DAGID  string `json:"dag_id"`
	NodeID string `json:"node_id"`
	Reason string `json:"reason"`
}

// NodeRetry schedules another attempt of a failed node.
type NodeRetry struct {
	DAGID     string    `json:"dag_id"`
	NodeID    string    `json:"node_id"`
	Attempt   int       `json:"attempt"`
	NotBefore time.Time `json:"not_before"`
	Reason    string    `json:"reason,omitempty"`
}

// Checkpoint marks a completed DAG layer.
type Checkpoint struct {
	DAGID     string   `json:"dag_id"`
	Layer     int      `json:"layer"`
	Succeeded []string `json:"succeeded,omitempty"`
	Failed    []string `json:"failed,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
}

// Workflow outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// WorkflowComplete ends a workflow.
type WorkflowComplete struct {
	DAGID     string        `json:"dag_id"`
	Outcome   string        `json:"outcome"`
	Summary   string        `json:"summary"`
	Succeeded int           `json:"succeeded"`
	Failed    int           `json:"failed"`
	Skipped   int           `json:"skipped"`
	Duration  time.Duration `json:"duration"`
}

// ClarificationRequest is a question for the user; the answer goes back to Asker.
type ClarificationRequest struct {
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	Context  string   `json:"context,omitempty"`
	Asker    string   `json:"asker"`
}

// ClarificationResponse answers a clarification request.
type ClarificationResponse struct {
	Answer    string `json:"answer"`
	InReplyTo string `json:"in_reply_to"`
}

// ValidateTask asks the Inspector to check a node's work.
type ValidateTask struct {
	DAGID  string `json:"dag_id"`
	NodeID string `json:"node_id"`
	Check  string `json:"check,omitempty"`
}

// ValidationResult is the Inspector's verdict with evidence.
type ValidationResult struct {
	DAGID    string   `json:"dag_id"`
	NodeID   string   `json:"node_id"`
	Passed   bool     `json:"passed"`
	Issues   []string `json:"issues,omitempty"`
	Evidence string   `json:"evidence,omitempty"`
}

// ValidationFull is the full validation report for the user.
type ValidationFull struct {
	Passed  bool     `json:"passed"`
	Summary string   `json:"summary"`
	Issues  []string `json:"issues,omitempty"`
}

// Correction is one fix asked of the Architect.
type Correction struct {
	Issue      string `json:"issue"`
	Correction string `json:"correction"`
}

// Corrections is the shape shared by the Inspector's and Tester's correction requests.
type Corrections struct {
	Corrections []Correction `json:"corrections,omitempty"`
}

// Correction requests.
type (
	ValidationCorrections Corrections
	TestCorrections       Corrections
)

// TestPlanRequest asks the Tester for a test plan.
type TestPlanRequest struct {
	Request string `json:"request"`
}

// TestList is the shape shared by test plan messages.
type TestList struct {
	Tests []string `json:"tests,omitempty"`
}

// Test plan messages.
type (
	TestPlanResponse TestList
	TestDAGRequest   TestList
)

// TestsReady says implemented tests are ready to run.
type TestsReady struct {
	DAGID string `json:"dag_id"`
}

// TestResults are parsed test counts with the names of failing tests.
type TestResults struct {
	DAGID       string   `json:"dag_id"`
	NodeID      string   `json:"node_id"`
	Passed      int      `json:"passed"`
	Failed      int      `json:"failed"`
	Skipped     int      `json:"skipped"`
	FailedTests []string `json:"failed_tests,omitempty"`
	Evidence    string   `json:"evidence,omitempty"`
}

// UserOverride tells the Inspector or Tester to ignore an issue.
type UserOverride struct {
	Issue  string `json:"issue"`
	Reason string `json:"reason,omitempty"`
}

// UserInterrupt stops the running work so the user can change course.
type UserInterrupt struct {
	Reason string `json:"reason,omitempty"`
}

// RerouteRequest rejects a request as outside the sender's domain. The rejected
// message is the envelope's parent.
type RerouteRequest struct {
	Reason          string `json:"reason"`
	SuggestedTarget string `json:"suggested_target,omitempty"`
}

// DomainExpectationsRequest asks the Academic for a domain's implicit requirements
// (seed L992-996).
type DomainExpectationsRequest struct {
	IntentType          string   `json:"intent_type"`
	FeatureDomain       string   `json:"feature_domain"`
	ExistingConstraints []string `json:"existing_constraints,omitempty"`
}

// Expectation is one implicit requirement of a domain.
type Expectation struct {
	Expectation string `json:"expectation"`
	Priority    string `json:"priority"`
	Rationale   string `json:"rationale,omitempty"`
}

// DomainExpectationsResponse is the Academic's answer (seed L977-1003).
type DomainExpectationsResponse struct {
	Domain       string        `json:"domain"`
	Expectations []Expectation `json:"expectations,omitempty"`
	Confidence   float64       `json:"confidence"`
}

// ConsultRequest is a direct consultation (seed L2960-2982), addressed to the
// agent consulted. Chain is who asks, down the consultations that led here,
// the asker last: a consultation of an agent already in it is a loop.
type ConsultRequest struct {
	Question  string   `json:"question"`
	Context   string   `json:"context,omitempty"`
	Blocking  bool     `json:"blocking,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"`
	Chain     []string `json:"chain,omitempty"`
}

// ConsultResponse answers a consultation, addressed to the asker. Refused
// says why the consulted agent could not answer; Summary is the seed's
// ConsultationLog line for the Archivalist (L2942).
type ConsultResponse struct {
	RequestID   string   `json:"request_id,omitempty"`
	Answer      string   `json:"answer"`
	Confidence  float64  `json:"confidence,omitempty"`
	References  []string `json:"references,omitempty"`
	Suggestions []string `json:"suggestions,omitempty"`
	Refused     string   `json:"refused,omitempty"`
	Summary     string   `json:"summary,omitempty"`
}

// StreamControl controls a running LLM stream (seed L3754-3758).
type StreamControl struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// StreamChunk is one piece of a streamed LLM response (seed L3209-3246),
// published on the live subject of its correlation. CallID tells the calls of
// one correlation (the steps of an agent loop) apart.
type StreamChunk struct {
	Index  int    `json:"index"`
	Kind   string `json:"kind"`
	Text   string `json:"text,omitempty"`
	CallID string `json:"call_id,omitempty"`
}

// ToolCall records that a tool is about to run. It precedes the side effect, so a
// crash mid-run leaves a call with no result: the interrupted attempt.
type ToolCall struct {
	CallID  string         `json:"call_id"`
	Tool    string         `json:"tool"`
	Args    map[string]any `json:"args,omitempty"`
	DAGID   string         `json:"dag_id,omitempty"`
	NodeID  string         `json:"node_id,omitempty"`
	Attempt int            `json:"attempt,omitempty"`
}

// ToolResult is the recorded, redacted result of a tool call.
type ToolResult struct {
	CallID      string   `json:"call_id"`
	Tool        string   `json:"tool"`
	OK          bool     `json:"ok"`
	ExitCode    int      `json:"exit_code"`
	Signal      string   `json:"signal,omitempty"`
	KillSignals []string `json:"kill_signals,omitempty"`
	Output      string   `json:"output,omitempty"`
	Stdout      string   `json:"stdout,omitempty"`
	Stderr      string   `json:"stderr,omitempty"`
	StdoutBytes int64    `json:"stdout_bytes,omitempty"`
	StderrBytes int64    `json:"stderr_bytes,omitempty"`
	Truncated   bool     `json:"truncated,omitempty"`
	Partial     bool     `json:"partial,omitempty"`
	TimedOut    bool     `json:"timed_out,omitempty"`
	Canceled    bool     `json:"canceled,omitempty"`
	DurationMS  int64    `json:"duration_ms"`
	DurationUS  int64    `json:"duration_us,omitempty"` // the same in µs (none before it was recorded: see Seconds)
	Summary     string   `json:"summary,omitempty"`
	Error       string   `json:"error,omitempty"`
	// Data is the structured result of the file tools, as JSON text.
	Data    string `json:"data,omitempty"`
	DAGID   string `json:"dag_id,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// Seconds is how long the tool ran: from DurationUS, or from DurationMS for a
// result recorded before DurationUS was.
func (r *ToolResult) Seconds() float64 {
	if r.DurationUS > 0 {
		return float64(r.DurationUS) / 1e6
	}
	return float64(r.DurationMS) / 1e3
}

// LLMMessage is one chat message sent to or received from a model.
type LLMMessage struct {
	Role       string        `json:"role"`
	Content    string        `json:"content,omitempty"`
	ToolCalls  []LLMToolCall `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
	Name       string        `json:"name,omitempty"`
}

// LLMToolCall is a tool call the model asked for.
type LLMToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// LLMRequest records that an LLM call is about to be made, after its budget check.
type LLMRequest struct {
	CallID          string       `json:"call_id"`
	Agent           string       `json:"agent"`
	Model           string       `json:"model"`
	MessagesDigest  string       `json:"messages_digest"`
	Messages        []LLMMessage `json:"messages,omitempty"`
	Tools           []string     `json:"tools,omitempty"`
	EstimatedTokens int          `json:"estimated_tokens"`
	BudgetChecked   bool         `json:"budget_checked"`
	DAGID           string       `json:"dag_id,omitempty"`
	NodeID          string       `json:"node_id,omitempty"`
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// LLMResponse is the recorded response of an LLM call; a redelivery reuses it.
type LLMResponse struct {
	CallID       string        `json:"call_id"`
	Model        string        `json:"model"`
	Content      string        `json:"content,omitempty"`
	ToolCalls    []LLMToolCall `json:"tool_calls,omitempty"`
	FinishReason string        `json:"finish_reason,omitempty"`
	Usage        Usage         `json:"usage"`
	LatencyMS    int64         `json:"latency_ms"`
	Error        string        `json:"error,omitempty"`
}

// LLMUsage attributes one call's tokens and cost (seed L4179-4194).
type LLMUsage struct {
	CallID   string  `json:"call_id"`
	Agent    string  `json:"agent"`
	Provider string  `json:"provider,omitempty"`
	Model    string  `json:"model"`
	DAGID    string  `json:"dag_id,omitempty"`
	NodeID   string  `json:"node_id,omitempty"`
	Usage    Usage   `json:"usage"`
	CostUSD  float64 `json:"cost_usd,omitempty"`
}

// Signal actions and scopes.
const (
	SignalPause  = "pause"
	SignalResume = "resume"
	SignalCancel = "cancel"

	ScopeSession = "session"
	ScopeAll     = "all"
)

// Signal pauses, resumes or cancels one session (the envelope's) or everything.
type Signal struct {
	Action   string    `json:"action"`
	Scope    string    `json:"scope"`
	Reason   string    `json:"reason,omitempty"`
	ResumeAt time.Time `json:"resume_at,omitempty"`
}

// DeadLetter records a message given up on. The original bytes and headers are in
// SYLK_DLQ; this event makes the fact visible in the session's history.
type DeadLetter struct {
	Consumer   string `json:"consumer"`
	Reason     string `json:"reason"`
	StreamSeq  uint64 `json:"stream_seq"`
	Subject    string `json:"subject"`
	Deliveries int    `json:"deliveries"`
	OriginalID string `json:"original_id,omitempty"`
}

// CircuitChange records a circuit breaker transition (seed L6157-6380).
type CircuitChange struct {
	Resource string `json:"resource"`
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason,omitempty"`
	Failures int    `json:"failures,omitempty"`
}

// AgentRestart records that the supervisor restarted an agent loop.
type AgentRestart struct {
	Agent    string `json:"agent"`
	Reason   string `json:"reason"`
	Restarts int    `json:"restarts"`
}

// Notice levels.
const (
	NoticeInfo  = "info"
	NoticeWarn  = "warn"
	NoticeError = "error"
)

// Notice is a message from the runtime to the user, with what to do next.
// A notice answers the request it follows from (the request ends there: an
// error or a warning that it was not done, or information that it needs no
// more) unless it is Advisory: then the work it is about goes on, and a client
// shows it and keeps waiting for the outcome.
type Notice struct {
	Level    string `json:"level"`
	Text     string `json:"text"`
	Hint     string `json:"hint,omitempty"`
	Advisory bool   `json:"advisory,omitempty"`
}
