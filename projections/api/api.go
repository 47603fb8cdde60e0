// Package api serves the projections on NATS request/reply (nats.go micro) and
// is the client for it, so the CLI and outside clients read state the same
// way. The server runs inside `sylk serve`, beside the projector.
//
// Every endpoint takes a JSON request and answers JSON: the projections types
// (projections.Session, projections.DAG, ...), with their json tags. Errors are
// micro errors: the Nats-Service-Error-Code header holds an HTTP-like code
// (400 bad request, 404 not found, 409 ambiguous id, 500 internal, 504 the
// projections did not reach min_seq in time) and Nats-Service-Error a message
// naming the id at fault.
//
// Read-your-writes: a request's min_seq makes the server wait (up to
// MaxWait) until the projections have applied that stream sequence, so a
// client that appended an event at seq N and asks with min_seq N sees it.
//
// Endpoints (request fields in brackets):
//
//	sylk.api.session.get         [id]                      Session
//	sylk.api.session.list        [state]                   []Session
//	sylk.api.dag.get             [id, session]             DAG
//	sylk.api.dag.list            [session, state]          []DAG
//	sylk.api.checkpoint.list     [session, dag]            []Checkpoint
//	sylk.api.pending.list        [session]                 []PendingRequest
//	sylk.api.pending.get         [session, id]             PendingRequest
//	sylk.api.plan.mode           [session]                 PlanMode
//	sylk.api.permit.list         [session, state]          []Permit
//	sylk.api.permit.get          [id]                      Permit
//	sylk.api.permit.grants       []                        []PermitGrant
//	sylk.api.replay              [session, from, until, until_time, limit]  LogPage
//	sylk.api.replay.state        [session, as_of]          SessionView
//	sylk.api.trace.get           [id]                      Trace
//	sylk.api.call.tool           [id]                      Call{seq, tool_result}
//	sylk.api.call.llm            [id]                      Call{seq, llm_response}
//	sylk.api.embeddings          [keys]                    map[key]Embedding (the recorded ones)
//	sylk.api.rejection.list      [projection, session, seq, limit]  []Rejection
//	sylk.api.history.list        [session, session_ids, exclude_sessions, current_only,
//	                              cross_session, categories, search_text, since_time,
//	                              until_time, limit]        []HistoryEntry
//	sylk.api.history.failures    [failures]                []FailureMemory
//	sylk.api.code.query          [code]                    CodeResult
//	sylk.api.docs.query          [docs]                    DocsResult
//	sylk.api.graph.query         [graph]                   GraphResult
//	sylk.api.pipeline.get        [id]                      Pipeline
//	sylk.api.pipeline.list       [session, dag, node, state]  []Pipeline
//	sylk.api.variant.get         [id]                      VariantGroup
//	sylk.api.variant.list        [session, dag, node]      []VariantGroup
//	sylk.api.loadout.get         [session, agent]          Loadout
//	sylk.api.loadout.list        [session]                 []Loadout
//	sylk.api.schedule.get        name                      Schedule
//	sylk.api.schedule.list                                 []Schedule
//	sylk.api.audit.query         [audit]                   []AuditEntry
//	sylk.api.wait                [min_seq]                 Status
//	sylk.api.projections.status  []                        Status
//	sylk.api.projections.verify  []                        VerifyReport
//	sylk.api.projections.rebuild []                        Status
//
// Any NATS client can call them, e.g.
//
//	nats req sylk.api.session.get '{"id":"s-1a2b"}'
//	nats req sylk.api.history.list '{"search_text":"logout","categories":["failure"]}'
//	nats req sylk.api.audit.query '{"audit":{"category":"permission","outcome":"denied"}}'
package api

import (
	"errors"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// The service's name and version in micro's discovery ($SRV.INFO.sylk).
const (
	ServiceName    = "sylk"
	ServiceVersion = "1.0.0"
)

// Endpoint subjects.
const (
	Prefix                = events.APIPrefix
	SubjectSessionGet     = Prefix + ".session.get"
	SubjectSessionList    = Prefix + ".session.list"
	SubjectDAGGet         = Prefix + ".dag.get"
	SubjectDAGList        = Prefix + ".dag.list"
	SubjectCheckpointList = Prefix + ".checkpoint.list"
	SubjectPendingList    = Prefix + ".pending.list"
	SubjectPendingGet     = Prefix + ".pending.get"
	SubjectPlanMode       = Prefix + ".plan.mode"
	SubjectPermitList     = Prefix + ".permit.list"
	SubjectPermitGet      = Prefix + ".permit.get"
	SubjectPermitGrants   = Prefix + ".permit.grants"
	SubjectReplay         = Prefix + ".replay"
	SubjectReplayState    = Prefix + ".replay.state"
	SubjectTrace          = Prefix + ".trace.get"
	SubjectToolResult     = Prefix + ".call.tool"
	SubjectLLMResponse    = Prefix + ".call.llm"
	SubjectEmbeddings     = Prefix + ".embeddings"
	SubjectRejectionList  = Prefix + ".rejection.list"
	SubjectHistoryList    = Prefix + ".history.list"
	SubjectCode           = Prefix + ".code.query"
	SubjectDocs           = Prefix + ".docs.query"
	SubjectGraph          = Prefix + ".graph.query"
	SubjectFailures       = Prefix + ".history.failures"
	SubjectPipelineGet    = Prefix + ".pipeline.get"
	SubjectPipelineList   = Prefix + ".pipeline.list"
	SubjectVariantGet     = Prefix + ".variant.get"
	SubjectVariantList    = Prefix + ".variant.list"
	SubjectLoadoutGet     = Prefix + ".loadout.get"
	SubjectLoadoutList    = Prefix + ".loadout.list"
	SubjectScheduleGet    = Prefix + ".schedule.get"
	SubjectScheduleList   = Prefix + ".schedule.list"
	SubjectAuditQuery     = Prefix + ".audit.query"
	SubjectWait           = Prefix + ".wait"
	SubjectStatus         = Prefix + ".projections.status"
	SubjectVerify         = Prefix + ".projections.verify"
	SubjectRebuild        = Prefix + ".projections.rebuild"
)

// MaxWait bounds how long the server waits for a request's min_seq.
const MaxWait = 30 * time.Second

// Error codes.
const (
	CodeBadRequest = "400"
	CodeNotFound   = "404"
	CodeAmbiguous  = "409"
	CodeInternal   = "500"
	CodeTimeout    = "504"
)

// ErrNoServer: no sylk server answers on sylk.api.
var ErrNoServer = errors.New("no sylk server answers on " + Prefix)

// Request is the body of every request; each endpoint reads the fields it
// documents and ignores the others.
type Request struct {
	ID      string `json:"id,omitempty"`
	Session string `json:"session,omitempty"`
	Agent   string `json:"agent,omitempty"`
	// Name is a schedule's name.
	Name       string    `json:"name,omitempty"`
	DAG        string    `json:"dag,omitempty"`
	Node       string    `json:"node,omitempty"`
	State      string    `json:"state,omitempty"`
	Projection string    `json:"projection,omitempty"`
	Seq        uint64    `json:"seq,omitempty"`
	Limit      int       `json:"limit,omitempty"`
	From       uint64    `json:"from,omitempty"`
	Until      uint64    `json:"until,omitempty"`
	UntilTime  time.Time `json:"until_time,omitzero"`
	// Global asks for the global log (projections.LogQuery.Global).
	Global bool             `json:"global,omitempty"`
	AsOf   projections.AsOf `json:"as_of,omitzero"`
	// History queries (projections.HistoryQuery has the same JSON names).
	SinceTime       time.Time `json:"since_time,omitzero"`
	Sessions        []string  `json:"session_ids,omitempty"`
	ExcludeSessions []string  `json:"exclude_sessions,omitempty"`
	CurrentOnly     bool      `json:"current_only,omitempty"`
	CrossSession    bool      `json:"cross_session,omitempty"`
	Categories      []string  `json:"categories,omitempty"`
	Search          string    `json:"search_text,omitempty"`
	// Failures is a failure memory query.
	Failures *projections.FailureQuery `json:"failures,omitempty"`
	// Keys are embedding keys (schemas.EmbeddingKey).
	Keys []string `json:"keys,omitempty"`
	// Code is a code index query.
	Code *projections.CodeQuery `json:"code,omitempty"`
	// Audit is an audit query.
	Audit *projections.AuditQuery `json:"audit,omitempty"`
	// Docs is a documents query.
	Docs *projections.DocsQuery `json:"docs,omitempty"`
	// Graph is a knowledge graph query.
	Graph *projections.GraphQuery `json:"graph,omitempty"`
	// MinSeq makes the server answer only once the projections have applied
	// this stream sequence.
	MinSeq uint64 `json:"min_seq,omitempty"`
}

// Call is a recorded side effect and the sequence of its event.
type Call struct {
	Seq         uint64               `json:"seq"`
	ToolResult  *schemas.ToolResult  `json:"tool_result,omitempty"`
	LLMResponse *schemas.LLMResponse `json:"llm_response,omitempty"`
}

// Error is an error the server answered with. It matches the projections
// sentinel of its code (projections.ErrNotFound for 404, ErrAmbiguous for
// 409, ErrInvalidQuery for 400) with errors.Is.
type Error struct {
	Subject     string
	Code        string
	Description string
}

func (e *Error) Error() string { return e.Description }

// Is matches the sentinel errors of the codes.
func (e *Error) Is(target error) bool {
	switch target {
	case projections.ErrNotFound:
		return e.Code == CodeNotFound
	case projections.ErrAmbiguous:
		return e.Code == CodeAmbiguous
	case projections.ErrInvalidQuery:
		return e.Code == CodeBadRequest
	}
	return false
}

// code maps an error to its response code.
func code(err error) string {
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, projections.ErrAmbiguous):
		return CodeAmbiguous
	case errors.Is(err, errBadRequest), errors.Is(err, projections.ErrInvalidQuery):
		return CodeBadRequest
	case errors.Is(err, errTimeout):
		return CodeTimeout
	}
	return CodeInternal
}

var (
	errBadRequest = errors.New("bad request")
	errTimeout    = errors.New("timed out")
)
