package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// DefaultTimeout bounds a request whose context has no deadline; verify and
// rebuild take VerifyTimeout.
const (
	DefaultTimeout = 30 * time.Second
	VerifyTimeout  = 30 * time.Minute
)

// Client reads projections from the server over NATS. It is a
// projections.Reader: the answers and errors are those of the store itself.
type Client struct {
	nc *nats.Conn
	// MinSeq, when set, is sent with every request: answers reflect at least
	// that stream sequence.
	MinSeq uint64
}

var _ projections.Reader = (*Client)(nil)

// NewClient returns a client on nc.
func NewClient(nc *nats.Conn) *Client { return &Client{nc: nc} }

// call sends req to subject and decodes the answer into out.
func (c *Client) call(ctx context.Context, subject string, req *Request, out any) error {
	return c.callTimeout(ctx, subject, req, out, DefaultTimeout)
}

func (c *Client) callTimeout(ctx context.Context, subject string, req *Request, out any, timeout time.Duration) error {
	if req == nil {
		req = &Request{}
	}
	if req.MinSeq == 0 {
		req.MinSeq = c.MinSeq
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := c.nc.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w (is `sylk serve` running?)", ErrNoServer)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &Error{Subject: subject, Code: code, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%s: unreadable answer: %w", subject, err)
	}
	return nil
}

func one[T any](ctx context.Context, c *Client, subject string, req *Request) (*T, error) {
	var out T
	if err := c.call(ctx, subject, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func list[T any](ctx context.Context, c *Client, subject string, req *Request) ([]*T, error) {
	var out []*T
	if err := c.call(ctx, subject, req, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Ping reports whether a server answers.
func (c *Client) Ping(ctx context.Context) error {
	var st projections.Status
	return c.call(ctx, SubjectStatus, nil, &st)
}

// Session returns one session.
func (c *Client) Session(ctx context.Context, id string) (*projections.Session, error) {
	return one[projections.Session](ctx, c, SubjectSessionGet, &Request{ID: id})
}

// Sessions lists sessions in creation order.
func (c *Client) Sessions(ctx context.Context, f projections.SessionFilter) ([]*projections.Session, error) {
	return list[projections.Session](ctx, c, SubjectSessionList, &Request{State: string(f.State)})
}

// DAG returns a DAG by id.
func (c *Client) DAG(ctx context.Context, id string) (*projections.DAG, error) {
	return one[projections.DAG](ctx, c, SubjectDAGGet, &Request{ID: id})
}

// SessionDAG returns the DAG id of one session.
func (c *Client) SessionDAG(ctx context.Context, session, id string) (*projections.DAG, error) {
	return one[projections.DAG](ctx, c, SubjectDAGGet, &Request{ID: id, Session: session})
}

// DAGs lists DAGs in submission order.
func (c *Client) DAGs(ctx context.Context, f projections.DAGFilter) ([]*projections.DAG, error) {
	return list[projections.DAG](ctx, c, SubjectDAGList, &Request{Session: f.Session, State: string(f.State)})
}

// Checkpoints lists a session's checkpoints.
func (c *Client) Checkpoints(ctx context.Context, session, dag string) ([]*projections.Checkpoint, error) {
	return list[projections.Checkpoint](ctx, c, SubjectCheckpointList, &Request{Session: session, DAG: dag})
}

// Pending lists the open requests waiting on the user.
func (c *Client) Pending(ctx context.Context, session string) ([]*projections.PendingRequest, error) {
	return list[projections.PendingRequest](ctx, c, SubjectPendingList, &Request{Session: session})
}

// PendingRequest returns a request, open or answered, by correlation or event id.
func (c *Client) PendingRequest(ctx context.Context, session, ref string) (*projections.PendingRequest, error) {
	return one[projections.PendingRequest](ctx, c, SubjectPendingGet, &Request{Session: session, ID: ref})
}

// PlanMode returns a session's plan mode.
func (c *Client) PlanMode(ctx context.Context, session string) (*projections.PlanMode, error) {
	return one[projections.PlanMode](ctx, c, SubjectPlanMode, &Request{Session: session})
}

// Permits lists permission requests.
func (c *Client) Permits(ctx context.Context, f projections.PermitFilter) ([]*projections.Permit, error) {
	return list[projections.Permit](ctx, c, SubjectPermitList, &Request{Session: f.Session, State: f.State})
}

// Permit returns a permission request by id.
func (c *Client) Permit(ctx context.Context, id string) (*projections.Permit, error) {
	return one[projections.Permit](ctx, c, SubjectPermitGet, &Request{ID: id})
}

// PermitGrants lists the remembered permission answers.
func (c *Client) PermitGrants(ctx context.Context) ([]*projections.PermitGrant, error) {
	return list[projections.PermitGrant](ctx, c, SubjectPermitGrants, &Request{})
}

// SessionLog returns a page of one session's events.
func (c *Client) SessionLog(ctx context.Context, q projections.LogQuery) (*projections.LogPage, error) {
	return one[projections.LogPage](ctx, c, SubjectReplay, &Request{Session: q.Session, From: q.From, Until: q.Until, UntilTime: q.UntilTime, Limit: q.Limit, Global: q.Global})
}

// SessionAsOf folds one session's events up to a point.
func (c *Client) SessionAsOf(ctx context.Context, session string, until projections.AsOf) (*projections.SessionView, error) {
	return one[projections.SessionView](ctx, c, SubjectReplayState, &Request{Session: session, AsOf: until})
}

// Trace returns the hops of a correlation id.
func (c *Client) Trace(ctx context.Context, correlation string) (*projections.Trace, error) {
	return one[projections.Trace](ctx, c, SubjectTrace, &Request{ID: correlation})
}

// ToolResult returns the recorded result of a tool call.
func (c *Client) ToolResult(ctx context.Context, callID string) (*schemas.ToolResult, uint64, error) {
	out, err := one[Call](ctx, c, SubjectToolResult, &Request{ID: callID})
	if err != nil {
		return nil, 0, err
	}
	return out.ToolResult, out.Seq, nil
}

// LLMResponse returns the recorded response of an LLM call.
func (c *Client) LLMResponse(ctx context.Context, callID string) (*schemas.LLMResponse, uint64, error) {
	out, err := one[Call](ctx, c, SubjectLLMResponse, &Request{ID: callID})
	if err != nil {
		return nil, 0, err
	}
	return out.LLMResponse, out.Seq, nil
}

// Embeddings returns the recorded embeddings of keys by key.
func (c *Client) Embeddings(ctx context.Context, keys []string) (map[string]*schemas.Embedding, error) {
	out := map[string]*schemas.Embedding{}
	if err := c.call(ctx, SubjectEmbeddings, &Request{Keys: keys}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Rejections lists refused events.
func (c *Client) Rejections(ctx context.Context, f projections.RejectionFilter) ([]*projections.Rejection, error) {
	return list[projections.Rejection](ctx, c, SubjectRejectionList, &Request{Projection: f.Projection, Session: f.Session, Seq: f.Seq, Limit: f.Limit})
}

// Failures lists the failure memories, the most frequent first.
func (c *Client) Failures(ctx context.Context, q projections.FailureQuery) ([]*projections.FailureMemory, error) {
	return list[projections.FailureMemory](ctx, c, SubjectFailures, &Request{Failures: &q})
}

// Code answers a query on the code index of a work directory.
func (c *Client) Code(ctx context.Context, q projections.CodeQuery) (*projections.CodeResult, error) {
	return one[projections.CodeResult](ctx, c, SubjectCode, &Request{Code: &q})
}

// Docs answers a query on the documents the Academic ingested.
func (c *Client) Docs(ctx context.Context, q projections.DocsQuery) (*projections.DocsResult, error) {
	return one[projections.DocsResult](ctx, c, SubjectDocs, &Request{Docs: &q})
}

// Graph answers a query on the knowledge graph.
func (c *Client) Graph(ctx context.Context, q projections.GraphQuery) (*projections.GraphResult, error) {
	return one[projections.GraphResult](ctx, c, SubjectGraph, &Request{Graph: &q})
}

// History lists what the Archivalist recorded, newest first.
func (c *Client) History(ctx context.Context, q projections.HistoryQuery) ([]*projections.HistoryEntry, error) {
	return list[projections.HistoryEntry](ctx, c, SubjectHistoryList, historyRequest(q))
}

// Loadout returns the skills and tools agent loaded in session.
func (c *Client) Loadout(ctx context.Context, session, agent string) (*projections.Loadout, error) {
	return one[projections.Loadout](ctx, c, SubjectLoadoutGet, &Request{Session: session, Agent: agent})
}

// Loadouts lists the loadouts of a session, by agent.
func (c *Client) Loadouts(ctx context.Context, session string) ([]*projections.Loadout, error) {
	return list[projections.Loadout](ctx, c, SubjectLoadoutList, &Request{Session: session})
}

// Schedule returns a schedule by name.
func (c *Client) Schedule(ctx context.Context, name string) (*projections.Schedule, error) {
	return one[projections.Schedule](ctx, c, SubjectScheduleGet, &Request{Name: name})
}

// Audit lists the audit entries q selects, oldest first.
func (c *Client) Audit(ctx context.Context, q projections.AuditQuery) ([]*projections.AuditEntry, error) {
	return list[projections.AuditEntry](ctx, c, SubjectAuditQuery, &Request{Audit: &q})
}

// Schedules lists the schedules by name.
func (c *Client) Schedules(ctx context.Context) ([]*projections.Schedule, error) {
	return list[projections.Schedule](ctx, c, SubjectScheduleList, nil)
}

// Status reports cursors, lag and sizes.
func (c *Client) Status(ctx context.Context) (*projections.Status, error) {
	return one[projections.Status](ctx, c, SubjectStatus, nil)
}

// WaitFor blocks until the server's projections have applied seq (at most
// MaxWait per request; it asks again until ctx ends).
func (c *Client) WaitFor(ctx context.Context, seq uint64) error {
	for {
		var out projections.Status
		err := c.call(ctx, SubjectWait, &Request{MinSeq: seq}, &out)
		var e *Error
		if errors.As(err, &e) && e.Code == CodeTimeout && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// Verify asks the server to rebuild in memory and compare; a difference is
// in the report and an error wrapping projections.ErrVerify.
func (c *Client) Verify(ctx context.Context) (*projections.VerifyReport, error) {
	var out projections.VerifyReport
	if err := c.callTimeout(ctx, SubjectVerify, nil, &out, VerifyTimeout); err != nil {
		return nil, err
	}
	if out.Difference != nil {
		return &out, fmt.Errorf("%w: %s", projections.ErrVerify, out.Difference)
	}
	return &out, nil
}

// Rebuild asks the server to drop and rebuild every projection; it returns
// once the drop is done. Status().Rebuild shows the progress.
func (c *Client) Rebuild(ctx context.Context) (*projections.Status, error) {
	var out projections.Status
	if err := c.callTimeout(ctx, SubjectRebuild, nil, &out, VerifyTimeout); err != nil {
		return nil, err
	}
	return &out, nil
}

// Pipeline returns a pipeline by id.
func (c *Client) Pipeline(ctx context.Context, id string) (*projections.Pipeline, error) {
	return one[projections.Pipeline](ctx, c, SubjectPipelineGet, &Request{ID: id})
}

// Pipelines lists the pipelines f selects.
func (c *Client) Pipelines(ctx context.Context, f projections.PipelineFilter) ([]*projections.Pipeline, error) {
	return list[projections.Pipeline](ctx, c, SubjectPipelineList, &Request{Session: f.Session, DAG: f.DAG, Node: f.Node, State: string(f.State)})
}

// VariantGroup returns a variant group by id.
func (c *Client) VariantGroup(ctx context.Context, id string) (*projections.VariantGroup, error) {
	return one[projections.VariantGroup](ctx, c, SubjectVariantGet, &Request{ID: id})
}

// VariantGroups lists the variant groups f selects.
func (c *Client) VariantGroups(ctx context.Context, f projections.PipelineFilter) ([]*projections.VariantGroup, error) {
	return list[projections.VariantGroup](ctx, c, SubjectVariantList, &Request{Session: f.Session, DAG: f.DAG, Node: f.Node})
}
