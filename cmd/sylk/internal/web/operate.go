package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/secrets"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
)

// decode reads a page's JSON body into v, or answers 400 naming the fields
// the body must have.
func decode(rw http.ResponseWriter, r *http.Request, v any, shape string) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(v); err != nil {
		http.Error(rw, "the body must be JSON "+shape+": "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// checkNames answers 400 for the first field that is not a valid name.
func checkNames(rw http.ResponseWriter, fields ...[2]string) bool {
	for _, f := range fields {
		if err := schemas.CheckName(f[0], f[1]); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return false
		}
	}
	return true
}

// serveDLQ lists the dead letters as `sylk dlq ls --json` does.
func (w *Web) serveDLQ(rw http.ResponseWriter, r *http.Request) {
	rows, err := agents.DeadLetters(r.Context(), w.opts.JS)
	if err != nil {
		http.Error(rw, "dead letters: "+err.Error(), http.StatusBadGateway)
		return
	}
	for i := range rows {
		rows[i].Envelope, rows[i].Headers = nil, nil
	}
	writeJSON(rw, rows)
}

// serveResend resends a dead letter as `sylk dlq resend` does.
func (w *Web) serveResend(rw http.ResponseWriter, r *http.Request) {
	var req struct {
		ID uint64 `json:"id"`
	}
	if !decode(rw, r, &req, `{"id": DEAD_LETTER_ID}`) {
		return
	}
	res, err := agents.ResendDeadLetter(r.Context(), w.opts.JS, req.ID, w.opts.Now())
	switch {
	case errors.Is(err, agents.ErrNoDeadLetter):
		http.Error(rw, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(rw, "resend: "+err.Error(), http.StatusBadGateway)
	default:
		writeJSON(rw, res)
	}
}

// usage is what the page's usage view shows: `sylk usage --json` without
// the budgets.
type usage struct {
	Session string `json:"session,omitempty"`
	llm.Report
	ByTask []llm.TaskUsage `json:"by_task,omitempty"`
}

// serveUsage reports the LLM calls' tokens and cost, of one session or of
// all, from the ledger the projector keeps current.
func (w *Web) serveUsage(rw http.ResponseWriter, r *http.Request) {
	var req struct {
		Session string `json:"session"`
	}
	if !decode(rw, r, &req, `{"session": SESSION (optional)}`) {
		return
	}
	if req.Session != "" && !checkNames(rw, [2]string{"session", req.Session}) {
		return
	}
	rep := w.ledger.Report(req.Session)
	writeJSON(rw, usage{Session: req.Session, Report: rep, ByTask: rep.Tasks()})
}

// exchange is one LLM call of a node: its request and recorded response.
type exchange struct {
	Seq         uint64               `json:"seq"`
	Request     *schemas.LLMRequest  `json:"request"`
	ResponseSeq uint64               `json:"response_seq,omitempty"`
	Response    *schemas.LLMResponse `json:"response,omitempty"`
}

// testRun is a test_results event of a node.
type testRun struct {
	Seq uint64 `json:"seq"`
	*schemas.TestResults
}

// nodeRecord is what a node recorded beside its tool calls (which the DAG
// lists): its LLM exchanges and its test evidence.
type nodeRecord struct {
	Exchanges []exchange `json:"exchanges"`
	Tests     []testRun  `json:"tests"`
}

// serveNode reads a node's LLM exchanges (llm_request events naming the
// node, each with its llm_response from the query API) and its test_results
// from the session's events.
func (w *Web) serveNode(rw http.ResponseWriter, r *http.Request) {
	var req struct{ Session, DAG, Node string }
	if !decode(rw, r, &req, `{"session": ..., "dag": ..., "node": ...}`) {
		return
	}
	if !checkNames(rw, [2]string{"session", req.Session}, [2]string{"dag", req.DAG}, [2]string{"node", req.Node}) {
		return
	}
	rec, err := w.node(r.Context(), req.Session, req.DAG, req.Node)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSON(rw, rec)
}

func (w *Web) node(ctx context.Context, session, dag, node string) (*nodeRecord, error) {
	rec := &nodeRecord{Exchanges: []exchange{}, Tests: []testRun{}}
	mine := func(d, n string) bool { return d == dag && n == node }
	err := w.scan(ctx, session, schemas.TypeLLMRequest, func(ev *events.Event) error {
		p, err := schemas.PayloadAs[schemas.LLMRequest](ev.Env)
		if err == nil && mine(p.DAGID, p.NodeID) {
			rec.Exchanges = append(rec.Exchanges, exchange{Seq: ev.Seq, Request: p})
		}
		return nil
	})
	if err == nil {
		err = w.scan(ctx, session, schemas.TypeTestResults, func(ev *events.Event) error {
			p, err := schemas.PayloadAs[schemas.TestResults](ev.Env)
			if err == nil && mine(p.DAGID, p.NodeID) {
				rec.Tests = append(rec.Tests, testRun{Seq: ev.Seq, TestResults: p})
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	c := api.NewClient(w.opts.Conn)
	for i := range rec.Exchanges {
		x := &rec.Exchanges[i]
		resp, seq, err := c.LLMResponse(ctx, x.Request.CallID)
		switch {
		case errors.Is(err, projections.ErrNotFound):
			// Not answered yet (or cut off): the request alone.
		case err != nil:
			return nil, fmt.Errorf("the response of LLM call %s: %w", x.Request.CallID, err)
		default:
			x.Response, x.ResponseSeq = resp, seq
		}
	}
	return rec, nil
}

// scan reads the session's events of type t, as `sylk tail --no-follow
// --session S --type T` does.
func (w *Web) scan(ctx context.Context, session string, t schemas.Type, fn func(*events.Event) error) error {
	subject := events.Filter{Session: session, Type: t}.Subject()
	return w.opts.Log.Scan(ctx, subject, events.Cursor{}, 0, func(ev *events.Event) error {
		if ev.Env == nil {
			return nil
		}
		return fn(ev)
	})
}

// serveAnswer answers a clarification that waits on the user, as `sylk plan
// answer` does: a clarification_response from the user in reply to the
// question, after the same check for secrets.
func (w *Web) serveAnswer(rw http.ResponseWriter, r *http.Request) {
	var req struct {
		Session  string `json:"session"`
		Question string `json:"question"`
		Answer   string `json:"answer"`
	}
	if !decode(rw, r, &req, `{"session": ..., "question": ..., "answer": ...}`) {
		return
	}
	if !checkNames(rw, [2]string{"session", req.Session}, [2]string{"question", req.Question}) {
		return
	}
	if strings.TrimSpace(req.Answer) == "" {
		http.Error(rw, "the answer is empty: write what the agents asked for", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	if err := secrets.Refuse(ctx, w.redactor, w.opts.Log, w.opts.Now(), req.Session, "your answer", req.Answer); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, secrets.ErrFound) {
			status = http.StatusUnprocessableEntity
		}
		http.Error(rw, err.Error(), status)
		return
	}
	seq, err := w.answer(ctx, req.Session, req.Question, projections.KindClarification, func(pr *projections.PendingRequest) (schemas.Type, any) {
		return schemas.TypeClarificationResponse, schemas.ClarificationResponse{Answer: req.Answer, InReplyTo: pr.RequestID}
	})
	if err != nil {
		answerError(rw, err)
		return
	}
	writeJSON(rw, map[string]any{"seq": seq, "session": req.Session, "question": req.Question})
}
