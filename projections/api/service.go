package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sylk/sylk/projections"
)

// Service answers the endpoints from a store. Each request is handled in its
// own goroutine, so a slow one (verify, a min_seq wait) holds up no other.
type Service struct {
	svc    micro.Service
	nc     *nats.Conn
	store  *projections.Store
	src    projections.Source
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Serve starts the service on nc, answering from store; verify and rebuild
// read src (the event log). Stop it before closing the store.
func Serve(ctx context.Context, nc *nats.Conn, store *projections.Store, src projections.Source, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{nc: nc, store: store, src: src, log: log}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "Sylk projections: sessions, DAGs, checkpoints, pending requests, session logs, traces, history, loadouts, schedules",
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("start the api service: %w", err)
	}
	s.svc = svc
	for subject, h := range s.handlers() {
		name := strings.ReplaceAll(strings.TrimPrefix(subject, Prefix+"."), ".", "-")
		if err := svc.AddEndpoint(name, s.wrap(subject, h), micro.WithEndpointSubject(subject)); err != nil {
			return nil, errors.Join(fmt.Errorf("add endpoint %s: %w", subject, err), s.Stop())
		}
	}
	// Make sure the server has the subscriptions before anyone is told we
	// answer.
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		return nil, errors.Join(fmt.Errorf("start the api service: %w", err), s.Stop())
	}
	return s, nil
}

// Stop stops answering and waits for the requests in progress.
func (s *Service) Stop() error {
	err := s.svc.Stop()
	s.cancel()
	s.wg.Wait()
	return err
}

type handler func(ctx context.Context, req *Request) (any, error)

// wrap runs h in a goroutine of its own. That goroutine answers on the
// connection, not through the micro.Request: micro reads the request's error
// for its stats once the handler returns, so answering through it from
// another goroutine would race with that read.
func (s *Service) wrap(subject string, h handler) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		data, reply := r.Data(), r.Reply()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(subject, h, data, reply)
		}()
	})
}

func (s *Service) serve(subject string, h handler, data []byte, reply string) {
	req := &Request{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, req); err != nil {
			s.respondError(reply, subject, fmt.Errorf("%w: %s: the body is not a JSON request: %w", errBadRequest, subject, err))
			return
		}
	}
	if req.MinSeq > 0 {
		wctx, cancel := context.WithTimeout(s.ctx, MaxWait)
		err := s.store.WaitFor(wctx, req.MinSeq)
		cancel()
		if err != nil {
			s.respondError(reply, subject, fmt.Errorf("%w: the projections did not reach seq %d: %w", errTimeout, req.MinSeq, err))
			return
		}
	}
	out, err := h(s.ctx, req)
	if err != nil {
		s.respondError(reply, subject, err)
		return
	}
	body, err := json.Marshal(out)
	if err != nil {
		s.respondError(reply, subject, err)
		return
	}
	s.respond(subject, &nats.Msg{Subject: reply, Data: body})
}

// respondError answers with a micro error reply: the code and description in
// its headers, as micro.Request.Error sends them.
func (s *Service) respondError(reply, subject string, err error) {
	c := code(err)
	if c == CodeInternal {
		s.log.Warn("api: request failed", "subject", subject, "err", err)
	}
	s.respond(subject, &nats.Msg{Subject: reply, Header: nats.Header{micro.ErrorHeader: {err.Error()}, micro.ErrorCodeHeader: {c}}})
}

func (s *Service) respond(subject string, m *nats.Msg) {
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("api: respond", "subject", subject, "err", err)
	}
}

func need(field, v string) error {
	if v == "" {
		return fmt.Errorf("%w: %s is required", errBadRequest, field)
	}
	return nil
}

func (s *Service) handlers() map[string]handler {
	st := s.store
	return map[string]handler{
		SubjectSessionGet: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			return st.Session(ctx, r.ID)
		},
		SubjectSessionList: func(ctx context.Context, r *Request) (any, error) {
			return nonNil(st.Sessions(ctx, projections.SessionFilter{State: projections.SessionState(r.State)}))
		},
		SubjectDAGGet: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			if r.Session != "" {
				return st.SessionDAG(ctx, r.Session, r.ID)
			}
			return st.DAG(ctx, r.ID)
		},
		SubjectDAGList: func(ctx context.Context, r *Request) (any, error) {
			return nonNil(st.DAGs(ctx, projections.DAGFilter{Session: r.Session, State: projections.DAGState(r.State)}))
		},
		SubjectCheckpointList: func(ctx context.Context, r *Request) (any, error) {
			if err := need("session", r.Session); err != nil {
				return nil, err
			}
			return st.Checkpoints(ctx, r.Session, r.DAG)
		},
		SubjectPendingList: func(ctx context.Context, r *Request) (any, error) {
			return st.Pending(ctx, r.Session)
		},
		SubjectPendingGet: func(ctx context.Context, r *Request) (any, error) {
			if err := errors.Join(need("session", r.Session), need("id", r.ID)); err != nil {
				return nil, err
			}
			return st.PendingRequest(ctx, r.Session, r.ID)
		},
		SubjectPlanMode: func(ctx context.Context, r *Request) (any, error) {
			if err := need("session", r.Session); err != nil {
				return nil, err
			}
			return st.PlanMode(ctx, r.Session)
		},
		SubjectPermitList: func(ctx context.Context, r *Request) (any, error) {
			return st.Permits(ctx, projections.PermitFilter{Session: r.Session, State: r.State})
		},
		SubjectPermitGet: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			return st.Permit(ctx, r.ID)
		},
		SubjectPermitGrants: func(ctx context.Context, _ *Request) (any, error) {
			return st.PermitGrants(ctx)
		},
		SubjectReplay: func(ctx context.Context, r *Request) (any, error) {
			if err := need("session", r.Session); err != nil && !r.Global {
				return nil, err
			}
			return st.SessionLog(ctx, projections.LogQuery{Session: r.Session, From: r.From, Until: r.Until, UntilTime: r.UntilTime, Limit: r.Limit, Global: r.Global})
		},
		SubjectReplayState: func(ctx context.Context, r *Request) (any, error) {
			if err := need("session", r.Session); err != nil {
				return nil, err
			}
			return st.SessionAsOf(ctx, r.Session, r.AsOf)
		},
		SubjectTrace: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			return st.Trace(ctx, r.ID)
		},
		SubjectToolResult: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			res, seq, err := st.ToolResult(ctx, r.ID)
			return &Call{Seq: seq, ToolResult: res}, err
		},
		SubjectLLMResponse: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			res, seq, err := st.LLMResponse(ctx, r.ID)
			return &Call{Seq: seq, LLMResponse: res}, err
		},
		SubjectEmbeddings: func(ctx context.Context, r *Request) (any, error) {
			return st.Embeddings(ctx, r.Keys)
		},
		SubjectRejectionList: func(ctx context.Context, r *Request) (any, error) {
			return st.Rejections(ctx, projections.RejectionFilter{Projection: r.Projection, Session: r.Session, Seq: r.Seq, Limit: r.Limit})
		},
		SubjectHistoryList: func(ctx context.Context, r *Request) (any, error) {
			return st.History(ctx, historyQuery(r))
		},
		SubjectFailures: func(ctx context.Context, r *Request) (any, error) {
			var q projections.FailureQuery
			if r.Failures != nil {
				q = *r.Failures
			}
			return st.Failures(ctx, q)
		},
		SubjectCode: func(ctx context.Context, r *Request) (any, error) {
			if r.Code == nil {
				return nil, fmt.Errorf("%w: code: the request has no code query", errBadRequest)
			}
			return st.Code(ctx, *r.Code)
		},
		SubjectDocs: func(ctx context.Context, r *Request) (any, error) {
			if r.Docs == nil {
				return nil, fmt.Errorf("%w: docs: the request has no docs query", errBadRequest)
			}
			return st.Docs(ctx, *r.Docs)
		},
		SubjectGraph: func(ctx context.Context, r *Request) (any, error) {
			if r.Graph == nil {
				return nil, fmt.Errorf("%w: graph: the request has no graph query", errBadRequest)
			}
			return st.Graph(ctx, *r.Graph)
		},
		SubjectPipelineGet: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			return st.Pipeline(ctx, r.ID)
		},
		SubjectPipelineList: func(ctx context.Context, r *Request) (any, error) {
			return nonNil(st.Pipelines(ctx, pipelineFilter(r)))
		},
		SubjectVariantGet: func(ctx context.Context, r *Request) (any, error) {
			if err := need("id", r.ID); err != nil {
				return nil, err
			}
			return st.VariantGroup(ctx, r.ID)
		},
		SubjectVariantList: func(ctx context.Context, r *Request) (any, error) {
			return nonNil(st.VariantGroups(ctx, pipelineFilter(r)))
		},
		SubjectLoadoutGet: func(ctx context.Context, r *Request) (any, error) {
			if err := errors.Join(need("session", r.Session), need("agent", r.Agent)); err != nil {
				return nil, err
			}
			return st.Loadout(ctx, r.Session, r.Agent)
		},
		SubjectLoadoutList: func(ctx context.Context, r *Request) (any, error) {
			if err := need("session", r.Session); err != nil {
				return nil, err
			}
			return st.Loadouts(ctx, r.Session)
		},
		SubjectScheduleGet: func(ctx context.Context, r *Request) (any, error) {
			if err := need("name", r.Name); err != nil {
				return nil, err
			}
			return st.Schedule(ctx, r.Name)
		},
		SubjectScheduleList: func(ctx context.Context, r *Request) (any, error) {
			return st.Schedules(ctx)
		},
		SubjectAuditQuery: func(ctx context.Context, r *Request) (any, error) {
			var q projections.AuditQuery
			if r.Audit != nil {
				q = *r.Audit
			}
			return st.Audit(ctx, q)
		},
		SubjectWait: func(ctx context.Context, r *Request) (any, error) {
			return st.Status(ctx) // min_seq was waited for already
		},
		SubjectStatus: func(ctx context.Context, r *Request) (any, error) {
			return st.Status(ctx)
		},
		SubjectVerify: func(ctx context.Context, r *Request) (any, error) {
			rep, err := st.Verify(ctx, s.src)
			if errors.Is(err, projections.ErrVerify) {
				return rep, nil // the report carries the difference
			}
			return rep, err
		},
		SubjectRebuild: func(ctx context.Context, r *Request) (any, error) {
			if err := st.Projector(s.src).Rebuild(ctx, nil); err != nil {
				return nil, err
			}
			return st.Status(ctx)
		},
	}
}

// historyQuery is the history query a request carries, and historyRequest
// its inverse.
func historyQuery(r *Request) projections.HistoryQuery {
	return projections.HistoryQuery{
		ID: r.ID, Session: r.Session, Sessions: r.Sessions, ExcludeSessions: r.ExcludeSessions, CurrentOnly: r.CurrentOnly,
		CrossSession: r.CrossSession, Categories: r.Categories, Search: r.Search, Since: r.SinceTime, Until: r.UntilTime, Limit: r.Limit,
	}
}

func historyRequest(q projections.HistoryQuery) *Request {
	return &Request{
		ID: q.ID, Session: q.Session, Sessions: q.Sessions, ExcludeSessions: q.ExcludeSessions, CurrentOnly: q.CurrentOnly,
		CrossSession: q.CrossSession, Categories: q.Categories, Search: q.Search, SinceTime: q.Since, UntilTime: q.Until, Limit: q.Limit,
	}
}

func pipelineFilter(r *Request) projections.PipelineFilter {
	return projections.PipelineFilter{Session: r.Session, DAG: r.DAG, Node: r.Node, State: projections.PipelineState(r.State)}
}

// nonNil turns a nil list into an empty one, so JSON says [] rather than null.
func nonNil[T any](l []T, err error) ([]T, error) {
	if l == nil && err == nil {
		l = []T{}
	}
	return l, err
}
