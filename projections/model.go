package projections

import (
	"time"

	"github.com/sylk/sylk/schemas"
)

// SessionState is where a session is in its life (seed L1645-1651).
type SessionState string

// Session states. Completed and failed are final.
const (
	StateCreated   SessionState = "created"
	StateActive    SessionState = "active"
	StateSuspended SessionState = "suspended"
	StateCompleted SessionState = "completed"
	StateFailed    SessionState = "failed"
)

// SessionStates lists the states in lifecycle order.
var SessionStates = []SessionState{StateCreated, StateActive, StateSuspended, StateCompleted, StateFailed}

// Session is one session as the projection sees it (seed L1654-1682). Every
// timestamp is an event's timestamp.
type Session struct {
	ID          string                `json:"id"`
	Name        string                `json:"name,omitempty"`
	State       SessionState          `json:"state"`
	CreatedAt   time.Time             `json:"created_at"`
	ActivatedAt *time.Time            `json:"activated_at,omitempty"`
	SuspendedAt *time.Time            `json:"suspended_at,omitempty"`
	CompletedAt *time.Time            `json:"completed_at,omitempty"`
	FailedAt    *time.Time            `json:"failed_at,omitempty"`
	Summary     string                `json:"summary,omitempty"`
	FailReason  string                `json:"fail_reason,omitempty"`
	BaseBranch  string                `json:"base_branch,omitempty"`
	Config      schemas.SessionConfig `json:"config"`
	Metadata    map[string]string     `json:"metadata,omitempty"`
	Context     SessionContext        `json:"context"`
	// ActiveDAG is the DAG running in the session, if any; DAGHistory every DAG
	// it ran, in order.
	ActiveDAG  string   `json:"active_dag,omitempty"`
	DAGHistory []string `json:"dag_history,omitempty"`
	// Paused is set by a pause signal for this session and cleared by resume;
	// PausedBy is that signal's source (user; server for the resource
	// governor, which resumes only what it paused, also after a restart).
	Paused   bool   `json:"paused,omitempty"`
	PausedBy string `json:"paused_by,omitempty"`
	// Fork is set on a session forked from another: its history is the
	// parent's up to Fork.ParentSeq, then its own from Fork.Seq.
	Fork *ForkOf `json:"fork,omitempty"`
	// Transitions is every state change, oldest first.
	Transitions []Transition `json:"transitions,omitempty"`
	CreatedSeq  uint64       `json:"created_seq"`
	// UpdatedSeq is the last event that changed this record.
	UpdatedSeq uint64 `json:"updated_seq"`

	// Filled in when read, from other keys: whether the session is the focused
	// one, whether a global pause holds it, and its last event in the session log.
	Focused      bool      `json:"focused,omitempty"`
	LastSeq      uint64    `json:"last_seq,omitempty"`
	LastActiveAt time.Time `json:"last_active_at"`
}

// Transition is one change of a session's state.
type Transition struct {
	Seq   uint64       `json:"seq"`
	At    time.Time    `json:"at"`
	From  SessionState `json:"from,omitempty"`
	To    SessionState `json:"to"`
	Event schemas.Type `json:"event"`
}

// SessionContext is the session-private work state (seed L1685-1715), set by
// session_context_set events. File lists hold paths. The seed's message history
// is the session log itself (Store.SessionLog).
type SessionContext struct {
	// The fields session_context_set sets, the latest value of each.
	schemas.SessionContextSet
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// DAGState is where a DAG is: running until its workflow completes (or it is
// cancelled), or rejected at submission.
type DAGState string

// DAG states.
const (
	DAGRunning   DAGState = "running"
	DAGSucceeded DAGState = "succeeded"
	DAGFailed    DAGState = "failed"
	DAGCancelled DAGState = "cancelled"
	DAGRejected  DAGState = "rejected"
)

// NodeState is where a DAG node is.
type NodeState string

// Node states. A node is ready when every dependency succeeded.
const (
	NodePending    NodeState = "pending"
	NodeReady      NodeState = "ready"
	NodeDispatched NodeState = "dispatched"
	NodeRunning    NodeState = "running"
	NodeSucceeded  NodeState = "succeeded"
	NodeFailed     NodeState = "failed"
	NodeSkipped    NodeState = "skipped"
	NodeCancelled  NodeState = "cancelled"
)

// NodeStates lists the node states in order.
var NodeStates = []NodeState{NodePending, NodeReady, NodeDispatched, NodeRunning, NodeSucceeded, NodeFailed, NodeSkipped, NodeCancelled}

// Done reports whether a node in state s will not run again unless retried.
func (s NodeState) Done() bool {
	switch s {
	case NodeSucceeded, NodeFailed, NodeSkipped, NodeCancelled:
		return true
	}
	return false
}

// DAG is one submitted DAG and its progress (seed L1909-1915, L25496-25550).
type DAG struct {
	ID      string         `json:"id"`
	Session string         `json:"session"`
	Name    string         `json:"name,omitempty"`
	Prompt  string         `json:"prompt,omitempty"`
	Policy  schemas.Policy `json:"policy"`
	State   DAGState       `json:"state"`
	// Problems says why a rejected DAG was rejected.
	Problems []string `json:"problems,omitempty"`
	// Layers are the node ids by longest-path layer: a node's layer is one more
	// than its deepest dependency's.
	Layers [][]string `json:"layers,omitempty"`
	// CurrentLayer is the first layer with a node not yet done; len(Layers)
	// when all are.
	CurrentLayer int               `json:"current_layer"`
	Nodes        []*Node           `json:"nodes,omitempty"`
	Counts       map[NodeState]int `json:"counts,omitempty"`
	Outcome      *Outcome          `json:"outcome,omitempty"`
	// LastStatus is the Orchestrator's latest dag_status report.
	LastStatus  *schemas.DAGStatus `json:"last_status,omitempty"`
	SubmittedBy string             `json:"submitted_by"`
	Correlation string             `json:"correlation,omitempty"`
	CreatedSeq  uint64             `json:"created_seq"`
	CreatedAt   time.Time          `json:"created_at"`
	FinishedAt  *time.Time         `json:"finished_at,omitempty"`
}

// Node returns the node with the given id, or nil.
func (d *DAG) Node(id string) *Node {
	for _, n := range d.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Node is one DAG node and its progress.
type Node struct {
	ID        string    `json:"id"`
	Agent     string    `json:"agent,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Prompt    string    `json:"prompt,omitempty"`
	DependsOn []string  `json:"depends_on,omitempty"`
	Layer     int       `json:"layer"`
	State     NodeState `json:"state"`
	// Attempt is the current attempt: the last dispatched, or the next one
	// after a retry.
	Attempt   int         `json:"attempt,omitempty"`
	Result    *NodeResult `json:"result,omitempty"`
	LastError string      `json:"last_error,omitempty"`
	Retryable bool        `json:"retryable,omitempty"`
	Help      string      `json:"help,omitempty"`
	// SkipReason says why a skipped or cancelled node will not run.
	SkipReason string `json:"skip_reason,omitempty"`
	// Calls are the node's tool calls; ResultSeq is 0 for a call whose result
	// was never recorded (an interrupted attempt).
	Calls        []Call     `json:"calls,omitempty"`
	DispatchedAt *time.Time `json:"dispatched_at,omitempty"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// NodeResult is what a succeeded node produced.
type NodeResult struct {
	Summary  string `json:"summary,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	CallID   string `json:"call_id,omitempty"`
	Seq      uint64 `json:"seq"`
}

// Call is one tool call of a node.
type Call struct {
	ID        string `json:"id"`
	Tool      string `json:"tool,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	ResultSeq uint64 `json:"result_seq,omitempty"`
	OK        bool   `json:"ok,omitempty"`
}

// Outcome is how a workflow ended.
type Outcome struct {
	Outcome   string        `json:"outcome"`
	Summary   string        `json:"summary,omitempty"`
	Succeeded int           `json:"succeeded"`
	Failed    int           `json:"failed"`
	Skipped   int           `json:"skipped"`
	Duration  time.Duration `json:"duration,omitempty"`
	Seq       uint64        `json:"seq"`
}

// Checkpoint is a checkpoint event: a completed DAG layer, at stream sequence
// Seq. Resuming the DAG from it means the state as of Seq.
type Checkpoint struct {
	Session   string    `json:"session"`
	DAG       string    `json:"dag"`
	Layer     int       `json:"layer"`
	Seq       uint64    `json:"seq"`
	ID        string    `json:"id"`
	At        time.Time `json:"at"`
	Source    string    `json:"source"`
	Succeeded []string  `json:"succeeded,omitempty"`
	Failed    []string  `json:"failed,omitempty"`
	Skipped   []string  `json:"skipped,omitempty"`
}

// Pending request kinds and states.
const (
	KindClarification = "clarification"
	KindPlan          = "plan"

	PendingOpen     = "open"
	PendingAnswered = "answered"
	PendingApproved = "approved"
	PendingModified = "modified"
	PendingRejected = "rejected"
)

// PendingRequest is something that waits on the user: a clarification or a plan
// to approve. Asker is who gets the answer, so an answer given after a restart
// still reaches it. Answered requests are kept, with the answer.
type PendingRequest struct {
	Correlation string    `json:"correlation"`
	Session     string    `json:"session"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Asker       string    `json:"asker"`
	RequestID   string    `json:"request_id"`
	Question    string    `json:"question,omitempty"`
	Options     []string  `json:"options,omitempty"`
	Context     string    `json:"context,omitempty"`
	PlanID      string    `json:"plan_id,omitempty"`
	DAGID       string    `json:"dag_id,omitempty"`
	Seq         uint64    `json:"seq"`
	At          time.Time `json:"at"`
	Answer      string    `json:"answer,omitempty"`
	AnswerSeq   uint64    `json:"answer_seq,omitempty"`
	AnsweredBy  string    `json:"answered_by,omitempty"`
}

// Trace is the path of one correlation id through the agents: every hop, the
// confidence chain and the reroutes as of the last hop.
type Trace struct {
	Correlation string                    `json:"correlation"`
	Hops        []Hop                     `json:"hops"`
	Chain       []schemas.ConfidenceEntry `json:"confidence_chain,omitempty"`
	Confidence  float64                   `json:"cumulative_confidence"`
	Reroutes    []schemas.RerouteHop      `json:"reroutes,omitempty"`
	Intent      *schemas.StructuredIntent `json:"intent,omitempty"`
	Sessions    []string                  `json:"sessions"`
}

// Hop is one event of a trace.
type Hop struct {
	Seq     uint64       `json:"seq"`
	ID      string       `json:"id"`
	Parent  string       `json:"parent,omitempty"`
	Session string       `json:"session"`
	Type    schemas.Type `json:"type"`
	Source  string       `json:"source"`
	Target  string       `json:"target,omitempty"`
	At      time.Time    `json:"at"`
	// Confidence is the last entry of the chain at this hop, if it has one.
	Confidence *schemas.ConfidenceEntry `json:"confidence,omitempty"`
}

// Rejection records an event a projection refused, and why.
type Rejection struct {
	Projection string       `json:"projection"`
	Seq        uint64       `json:"seq"`
	ID         string       `json:"id,omitempty"`
	Session    string       `json:"session,omitempty"`
	Type       schemas.Type `json:"type,omitempty"`
	Reason     string       `json:"reason"`
}

// LogEntry is one event of a session log: its stream sequence and its bytes
// (the msgpack envelope).
type LogEntry struct {
	Seq  uint64 `json:"seq"`
	Data []byte `json:"data"`
	// From is the ancestor whose log the entry comes from, when the session
	// asked for is a fork and the event is part of the history it shares.
	From string `json:"from,omitempty"`
}

// ForkOf is where a fork branches off: the parent session, the last
// sequence of the parent's history it shares, and the sequence of the
// session_fork event that created it.
type ForkOf struct {
	Parent    string `json:"parent"`
	ParentSeq uint64 `json:"parent_seq"`
	Seq       uint64 `json:"seq"`
}

// LogQuery selects a range of one session's events.
type LogQuery struct {
	Session string `json:"session"`
	// From is the first sequence (inclusive, 0: the start).
	From uint64 `json:"from,omitempty"`
	// Until is the last sequence (inclusive, 0: no bound).
	Until uint64 `json:"until,omitempty"`
	// UntilTime stops before the first event with a later timestamp.
	UntilTime time.Time `json:"until_time,omitzero"`
	// Limit is the most entries returned (0: DefaultLogLimit).
	Limit int `json:"limit,omitempty"`
	// Global reads the global log instead of a session's: the signals of
	// scope all, which pause, resume or cancel every session (Session is not
	// read).
	Global bool `json:"global,omitempty"`
}

// DefaultLogLimit is the page size of SessionLog.
const DefaultLogLimit = 1000

// LogPage is a page of a session log. More says entries remain after the last;
// ask again from Next.
type LogPage struct {
	Entries []LogEntry `json:"entries"`
	More    bool       `json:"more,omitempty"`
	Next    uint64     `json:"next,omitempty"`
}

// SessionFilter selects sessions.
type SessionFilter struct {
	State SessionState `json:"state,omitempty"`
}

// DAGFilter selects DAGs.
type DAGFilter struct {
	Session string   `json:"session,omitempty"`
	State   DAGState `json:"state,omitempty"`
}

// SessionView is one session's state as of a point: the session, its DAGs, its
// checkpoints and what waits on the user.
type SessionView struct {
	Session     *Session          `json:"session"`
	DAGs        []*DAG            `json:"dags"`
	Checkpoints []*Checkpoint     `json:"checkpoints"`
	Pending     []*PendingRequest `json:"pending"`
	// AsOf is the last sequence folded in.
	AsOf uint64 `json:"as_of"`
}

// Status is the projector's position and each projection's size.
type Status struct {
	// Applied is the last sequence every projection has applied.
	Applied uint64 `json:"applied"`
	// StreamLast is the last sequence of the stream the projector knows of.
	StreamLast  uint64             `json:"stream_last"`
	Projections []ProjectionStatus `json:"projections"`
	Rebuild     *Progress          `json:"rebuild,omitempty"`
	// Ready says the projector has caught up with the stream since it started.
	Ready bool `json:"ready"`
	// StartupSeconds is how long opening the store and catching up took.
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
	Dir            string  `json:"dir"`
}

// ProjectionStatus is one projection's version, cursor, lag and size.
type ProjectionStatus struct {
	Name      string `json:"name"`
	Version   int    `json:"version"`
	Cursor    uint64 `json:"cursor"`
	Lag       uint64 `json:"lag"`
	SizeBytes uint64 `json:"size_bytes"`
	Rejected  int    `json:"rejected"`
}

// Progress is a rebuild under way.
type Progress struct {
	Done    uint64  `json:"done"`
	Total   uint64  `json:"total"`
	PerSec  float64 `json:"per_sec"`
	Seconds float64 `json:"seconds"`
	// Finished is set once the rebuild has caught up.
	Finished bool `json:"finished,omitempty"`
}

// HistoryEntry is an outcome, failure or decision the Archivalist recorded
// (a history_entry event), with the event's session, time and lineage.
type HistoryEntry struct {
	Seq     uint64    `json:"seq"`
	ID      string    `json:"id"`
	Session string    `json:"session"`
	At      time.Time `json:"at"`
	// Source is who recorded it; Cause the event it records (its parent) and
	// Correlation the request that event belongs to.
	Source      string   `json:"source"`
	Cause       string   `json:"cause,omitempty"`
	Correlation string   `json:"correlation,omitempty"`
	Category    string   `json:"category"`
	Summary     string   `json:"summary"`
	Detail      string   `json:"detail,omitempty"`
	DAG         string   `json:"dag_id,omitempty"`
	Node        string   `json:"node_id,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	// A failure's approach and error pattern (see schemas.HistoryEntry).
	Approach     string `json:"approach,omitempty"`
	ErrorPattern string `json:"error_pattern,omitempty"`
	// Promoted: every session's queries see it (set when read).
	Promoted bool `json:"promoted,omitempty"`
	// Score is the entry's BM25 relevance to a search (set when read).
	Score float64 `json:"score,omitempty"`
}

// HistoryQuery selects history entries (the seed's ArchiveQuery, L1922-1940).
//
// Which sessions (seed L33442): Sessions, if set; else Session and the
// entries promoted to project scope, if Session is set and CrossSession is
// not; Session alone with CurrentOnly; else every session. Session is the
// asker's session, so CrossSession with it reads them all. ExcludeSessions
// drops sessions from any of these. CurrentOnly together with CrossSession
// or Sessions, CurrentOnly without Session, and CrossSession with Sessions
// contradict themselves: they are refused with ErrInvalidQuery.
//
// Search is full-text: every word of it must be in the entry's summary,
// detail or tags (as a whole word, or a part of an identifier: "logout"
// finds TestLogout), and the entries come ranked by BM25, the most relevant
// first. Without Search entries come newest first. Since and Until bound the
// entries' times, both inclusive (their JSON names are those of the api's
// request fields). Limit keeps the first (0: DefaultHistoryLimit).
type HistoryQuery struct {
	// ID selects one entry by its event's id (the other filters still
	// apply).
	ID              string    `json:"id,omitempty"`
	Session         string    `json:"session,omitempty"`
	Sessions        []string  `json:"session_ids,omitempty"`
	ExcludeSessions []string  `json:"exclude_sessions,omitempty"`
	CurrentOnly     bool      `json:"current_only,omitempty"`
	CrossSession    bool      `json:"cross_session,omitempty"`
	Categories      []string  `json:"categories,omitempty"`
	Search          string    `json:"search_text,omitempty"`
	Since           time.Time `json:"since_time,omitzero"`
	Until           time.Time `json:"until_time,omitzero"`
	Limit           int       `json:"limit,omitempty"`
}

// FailureMemory counts the failures of one approach with one error pattern,
// across sessions (seed L15206-15696: failure memory). Level says what the
// count means: "warn" from WarnFailures recurrences, "change_approach" from
// ChangeApproachFailures.
type FailureMemory struct {
	Signature    string    `json:"signature"`
	Approach     string    `json:"approach"`
	ErrorPattern string    `json:"error_pattern"`
	Count        int       `json:"count"`
	Sessions     []string  `json:"sessions"`
	First        time.Time `json:"first"`
	Last         time.Time `json:"last"`
	LastSeq      uint64    `json:"last_seq"`
	LastSummary  string    `json:"last_summary"`
	Level        string    `json:"level,omitempty"`
}

// Failure memory thresholds: a failure seen this many times is a warning,
// and this many a sign to try another approach.
const (
	WarnFailures           = 2
	ChangeApproachFailures = 5
)

// FailureLevel is what n recurrences of a failure call for: "", "warn" or
// "change_approach".
func FailureLevel(n int) string {
	switch {
	case n >= ChangeApproachFailures:
		return "change_approach"
	case n >= WarnFailures:
		return "warn"
	}
	return ""
}

// FailureQuery selects failure memories: one by signature, or those
// matching an approach and an error pattern's words; the most frequent
// first.
type FailureQuery struct {
	Signature string `json:"signature,omitempty"`
	Search    string `json:"search_text,omitempty"`
	MinCount  int    `json:"min_count,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// DefaultHistoryLimit is how many entries History returns when the query sets
// no limit.
const DefaultHistoryLimit = 100
