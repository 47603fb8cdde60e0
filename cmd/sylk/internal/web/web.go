// Package web is the live web view `sylk serve --http` serves beside
// /metrics: a page embedded in the binary (no CDN, no build step) showing the
// sessions, their DAGs drawn live, the event log with the filters of `sylk
// tail`, what waits on the user (approve or reject a plan, answer a question
// from the page), the dead letters (resend), the LLM usage and cost, and a
// clicked node's tool calls, test results and LLM exchanges.
//
// The page reads state through the same query API the CLI uses (sylk.api.>,
// forwarded by POST /api/q/<endpoint>), and follows the stream through
// server-sent events (GET /api/events). The view has no reader of the
// stream of its own: the projector the server runs anyway hands it each
// event it reads, decoded once for both (projections.Store.Observe). With no
// page open the view only counts the llm_usage events for the usage figures;
// with pages open, each event is encoded once and fanned out to every page
// with a bounded queue each, so a page that stops reading is dropped (its
// EventSource reconnects and resumes after the last event it got) and never
// holds up the server or the projector. A page re-reads the state
// an event changed, asking the API for at least that event's sequence: the
// page is driven by the stream, it never polls.
//
// Authentication is the CLI's: the token the page needs is derived from the
// credential `sylk` uses to reach the server (the admin .creds file, or the
// token or password of an external server), so whoever may run the CLI may
// open the page (`sylk web url` prints its address with the token) and nobody
// else: a request without the token is refused.
package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

//go:embed static
var static embed.FS

// CookieName is the cookie holding the token once a page opened with it.
const CookieName = "sylk_web"

// RequestHeader must be on every POST a page sends with the cookie: a form
// or a script of another site cannot set it without the server's consent
// (CORS), so the cookie alone never makes a request that changes something.
const RequestHeader = "X-Sylk-Request"

// ErrNoCredential: the server has no credential to derive the token from.
var ErrNoCredential = errors.New("no credential to derive the web view's token from")

// Credential is what a client presents to the NATS server: the path of a
// .creds file, a token, or a user and password (the fields of server.json).
type Credential struct {
	CredsFile, Token, User, Password string
}

// Secret is the credential's secret: the .creds file's content (it holds the
// user's seed), the token, or the user and password.
func (c Credential) Secret() ([]byte, error) {
	switch {
	case c.CredsFile != "":
		b, err := os.ReadFile(c.CredsFile)
		if err != nil {
			return nil, fmt.Errorf("web view token: %w", err)
		}
		return b, nil
	case c.Token != "":
		return []byte(c.Token), nil
	case c.User != "":
		return []byte(c.User + "\x00" + c.Password), nil
	}
	return nil, ErrNoCredential
}

// Token is the web view's token for a credential's secret: an HMAC, so the
// token shows nothing of the secret and opens only the web view.
func Token(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sylk web view v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// RandomSecret is a secret for a server without authentication (benchmarks):
// the token is then only what the server says.
func RandomSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// Options say what a web view serves.
type Options struct {
	// Conn asks the query API and is where actions are appended.
	Conn *nats.Conn
	// Log is the stream: the past a page asks for (since) is read from it.
	Log *events.Log
	// Store is the process's projections store: its projector, which
	// `sylk serve` runs anyway, hands the view the events it reads (the
	// view has no reader of the stream of its own).
	Store *projections.Store
	// JS reaches the dead letters (SYLK_DLQ).
	JS jetstream.JetStream
	// Secrets are the patterns an answer from the page is checked against
	// before it is stored (the CLI's tools.secrets).
	Secrets tools.SecretOptions
	// Secret is the credential's secret the token derives from.
	Secret []byte
	// Now is the clock of the events the page appends.
	Now func() time.Time
	// Buffer is how many events a live view may have waiting (default
	// ClientBuffer).
	Buffer int
}

// Web is a running web view.
type Web struct {
	opts     Options
	token    string
	hub      *hub
	redactor *tools.Redactor
	// ledger holds the usage figures: the llm_usage events up to the
	// view's start, then each the projector reads, before any page hears
	// of it.
	ledger *llm.Ledger
	stop   func()
}

// Start begins following the stream through the store's projector (from its
// end: a page reads the past through the API) and returns the view; Close
// ends it.
func Start(ctx context.Context, o Options) (*Web, error) {
	if len(o.Secret) == 0 {
		return nil, ErrNoCredential
	}
	red, err := tools.NewRedactor(o.Secrets)
	if err != nil {
		return nil, fmt.Errorf("web: secret patterns: %w", err)
	}
	end, err := o.Log.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("web: follow the stream: %w", err)
	}
	if o.Buffer <= 0 {
		o.Buffer = ClientBuffer
	}
	w := &Web{opts: o, token: Token(o.Secret), hub: newHub(o.Buffer), redactor: red, ledger: llm.NewLedger()}
	// The projector hands over what it reads after start; the usage up to
	// start is read here: each event is counted once.
	start, stop := o.Store.Observe(end, w.feed)
	if start > 0 {
		if _, err := w.ledger.Read(ctx, o.Log, "", start); err != nil {
			stop()
			return nil, fmt.Errorf("web: %w", err)
		}
	}
	w.stop = stop
	return w, nil
}

// feed takes each event the projector reads: an llm_usage event is counted
// (from the payload the projector decoded), then the views that watch get
// it. With no page open, nothing else is done.
func (w *Web) feed(ev *events.Event, payload any) {
	if ev.Env != nil && ev.Env.Type == schemas.TypeLLMUsage {
		if u, ok := payload.(*schemas.LLMUsage); ok {
			w.ledger.Add(ev.Env.SessionID, *u)
		} else {
			w.ledger.Apply(ev.Env) // not decoded by the reader
		}
	}
	w.hub.feed(ev, payload)
}

// Close stops following the stream.
func (w *Web) Close() { w.stop() }

// Token is the token a browser must present.
func (w *Web) Token() string { return w.token }

// Drops is how many live views were dropped for not reading.
func (w *Web) Drops() int { return w.hub.Drops() }

// Watching is how many live views are open.
func (w *Web) Watching() int { return w.hub.Watching() }

// Register adds the web view's routes to mux: the page at /, its API under
// /api/, all behind the token.
func (w *Web) Register(mux *http.ServeMux) {
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	mux.Handle("GET /{$}", w.auth(files))
	mux.Handle("GET /static/", w.auth(http.StripPrefix("/static/", files)))
	mux.Handle("GET /api/events", w.auth(http.HandlerFunc(w.serveEvents)))
	mux.Handle("POST /api/q/{endpoint...}", w.auth(http.HandlerFunc(w.serveQuery)))
	mux.Handle("POST /api/plan/{action}", w.auth(http.HandlerFunc(w.servePlan)))
	mux.Handle("POST /api/question/answer", w.auth(http.HandlerFunc(w.serveAnswer)))
	mux.Handle("POST /api/dlq", w.auth(http.HandlerFunc(w.serveDLQ)))
	mux.Handle("POST /api/dlq/resend", w.auth(http.HandlerFunc(w.serveResend)))
	mux.Handle("POST /api/usage", w.auth(http.HandlerFunc(w.serveUsage)))
	mux.Handle("POST /api/node", w.auth(http.HandlerFunc(w.serveNode)))
}

// auth lets a request through with the token: in the Authorization header
// (Bearer), or the cookie a page gets by opening /?token=TOKEN (the URL `sylk
// web url` prints; the page then drops the token from the address bar). A
// POST with the cookie needs RequestHeader too.
func (w *Web) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if tok := r.URL.Query().Get("token"); tok != "" && r.Method == http.MethodGet {
			if !w.valid(tok) {
				refuse(rw, "the token in the address is not this server's: open the address `sylk web url` prints")
				return
			}
			http.SetCookie(rw, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(rw, r, u.String(), http.StatusSeeOther)
			return
		}
		if bearer, ok := bearerToken(r); ok {
			if !w.valid(bearer) {
				refuse(rw, "the bearer token is not this server's (`sylk web url --json` prints it)")
				return
			}
			next.ServeHTTP(rw, r)
			return
		}
		c, err := r.Cookie(CookieName)
		if err != nil || !w.valid(c.Value) {
			refuse(rw, "this page needs the token of your sylk credentials: open the address `sylk web url` prints")
			return
		}
		if r.Method != http.MethodGet && r.Header.Get(RequestHeader) == "" {
			http.Error(rw, "forbidden: a request that changes something needs the "+RequestHeader+" header", http.StatusForbidden)
			return
		}
		next.ServeHTTP(rw, r)
	})
}

func (w *Web) valid(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(w.token)) == 1
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) > len(p) && h[:len(p)] == p {
		return h[len(p):], true
	}
	return "", false
}

func refuse(rw http.ResponseWriter, msg string) {
	rw.Header().Set("WWW-Authenticate", `Bearer realm="sylk"`)
	http.Error(rw, "unauthorized: "+msg, http.StatusUnauthorized)
}
