// Package llmtest is a real HTTP server speaking the OpenAI chat-completions
// API (POST /v1/chat/completions, and /v1/embeddings with deterministic
// vectors, see Vector), scripted per test: plain and SSE-streamed
// replies, tool calls, 429 with Retry-After, 500, malformed JSON and replies
// that never come. It records every request it receives, so a test can prove
// how many calls were made (none, on a replay).
//
//	srv := llmtest.New(t)
//	srv.Script(llmtest.Text("hello"), llmtest.Status(429).WithRetryAfter("1"), llmtest.Text("again"))
//	cfg := llm.Config{BaseURL: srv.URL(), Model: "fake"}
//
// Replies are taken in order; a request with nothing scripted gets a 500
// saying so, and the test fails. Respond sets a function that answers instead
// of the script, for replies that depend on the request.
package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is what the server received: the parts of a chat-completions
// request tests look at.
type Request struct {
	Model          string    `json:"model"`
	Messages       []Message `json:"messages"`
	Tools          []Tool    `json:"tools,omitempty"`
	Stream         bool      `json:"stream"`
	MaxTokens      int       `json:"max_tokens,omitempty"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	// Auth is the Authorization header.
	Auth string `json:"-"`
}

// Message is one chat message of a request.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// ToolNames lists the names of the tools offered.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// Last is the content of the last message.
func (r Request) Last() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// System is the content of the system messages, joined.
func (r Request) System() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "system" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolCall is a tool call in a reply (or echoed back in a request).
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Call makes a tool call.
func Call(id, name, arguments string) ToolCall {
	c := ToolCall{ID: id, Type: "function"}
	c.Function.Name, c.Function.Arguments = name, arguments
	return c
}

// Reply is one scripted answer.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// RetryAfter is the Retry-After header (seconds or an HTTP date).
	RetryAfter string
	// Content and ToolCalls are the assistant message.
	Content   string
	ToolCalls []ToolCall
	// Finish is the finish reason; default "stop", or "tool_calls" with tool calls.
	Finish string
	// PromptTokens and CompletionTokens are the usage reported; by default
	// estimated from the request and the reply.
	PromptTokens, CompletionTokens int
	// NoUsage leaves usage out of the reply.
	NoUsage bool
	// Raw, when set, is the whole body, sent as is (malformed JSON).
	Raw string
	// Hang never answers: the handler waits until the client gives up.
	Hang bool
	// Stall, for a streamed request, sends the first piece of the content
	// and then nothing more until the client gives up.
	Stall bool
	// Delay is added before answering (besides the server's latency).
	Delay time.Duration
	// Chunks splits streamed content into this many pieces (default 4).
	Chunks int
}

// Text is a reply with content.
func Text(content string) Reply { return Reply{Content: content} }

// Tools is a reply with tool calls.
func Tools(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Status is an error reply with an OpenAI error body.
func Status(code int) Reply { return Reply{Status: code} }

// Malformed is a 200 reply whose body is not JSON.
func Malformed() Reply { return Reply{Raw: `{"id": "x", "choices": [ {"message": `} }

// Hanging is a reply that never comes.
func Hanging() Reply { return Reply{Hang: true} }

// Stalling is a streamed reply that stops after its first piece.
func Stalling(content string) Reply { return Reply{Content: content, Stall: true} }

// WithRetryAfter sets the Retry-After header.
func (r Reply) WithRetryAfter(v string) Reply { r.RetryAfter = v; return r }

// WithUsage sets the usage reported.
func (r Reply) WithUsage(prompt, completion int) Reply {
	r.PromptTokens, r.CompletionTokens = prompt, completion
	return r
}

// Server is the fake endpoint.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	script   []Reply
	respond  func(Request) Reply
	requests []Request
	latency  time.Duration
	release  chan struct{}

	embeds      []EmbedRequest
	embedScript []EmbedReply
}

// New starts a server, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{t: t, release: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

// Close releases hanging handlers and stops the server; it is safe to call
// twice.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// URL is the base URL of the API, ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Script queues replies, answered in order.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Respond answers every request with f once the script is used up.
func (s *Server) Respond(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// SetLatency makes every answer wait d first: the model's time.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls is how many requests the server received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests returns the requests received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Pending is how many scripted replies are left.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/embeddings") {
		s.embed(w, r)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, "not found: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request is not JSON: "+err.Error())
		return
	}
	req.Auth = r.Header.Get("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var reply Reply
	scripted := len(s.script) > 0
	switch {
	case scripted:
		reply, s.script = s.script[0], s.script[1:]
	case s.respond != nil:
		reply = s.respond(req)
	}
	latency, release := s.latency, s.release
	respond := s.respond
	s.mu.Unlock()
	if !scripted && respond == nil {
		s.t.Errorf("llmtest: request %d has no scripted reply (last message %q)", s.Calls(), trunc(req.Last()))
		writeError(w, http.StatusInternalServerError, "server_error", "llmtest: no scripted reply")
		return
	}
	if wait := latency + reply.Delay; wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-release:
			t.Stop()
			return
		}
	}
	switch {
	case reply.Hang:
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return
	case reply.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(reply.Raw))
		return
	case reply.Status != 0 && reply.Status != http.StatusOK:
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		kind := "server_error"
		if reply.Status == http.StatusTooManyRequests {
			kind = "rate_limit_exceeded"
		} else if reply.Status < 500 {
			kind = "invalid_request_error"
		}
		writeError(w, reply.Status, kind, fmt.Sprintf("llmtest: scripted status %d", reply.Status))
		return
	}
	if reply.Finish == "" {
		reply.Finish = "stop"
		if len(reply.ToolCalls) > 0 {
			reply.Finish = "tool_calls"
		}
	}
	if !reply.NoUsage {
		if reply.PromptTokens == 0 {
			reply.PromptTokens = promptTokens(req)
		}
		if reply.CompletionTokens == 0 {
			reply.CompletionTokens = max(1, (len(reply.Content)+len(argsOf(reply.ToolCalls)))/4)
		}
	}
	if req.Stream {
		s.stream(r.Context(), w, req, reply)
		return
	}
	msg := map[string]any{"role": "assistant", "content": reply.Content}
	if len(reply.ToolCalls) > 0 {
		msg["tool_calls"] = reply.ToolCalls
	}
	body := map[string]any{
		"id": "chatcmpl-llmtest", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": reply.Finish}},
	}
	if !reply.NoUsage {
		body["usage"] = usage(reply)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

// stream writes reply as server-sent events: a role chunk, the content in
// pieces, each tool call's name then its arguments in two pieces, the finish
// reason, the usage when asked for, and [DONE].
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any, u any) {
		chunk := map[string]any{"id": "chatcmpl-llmtest", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model}
		if delta != nil || finish != nil {
			if delta == nil {
				delta = map[string]any{}
			}
			chunk["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		} else {
			chunk["choices"] = []any{}
		}
		if u != nil {
			chunk["usage"] = u
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	pieces := reply.Chunks
	if pieces <= 0 {
		pieces = 4
	}
	for _, piece := range split(reply.Content, pieces) {
		send(map[string]any{"content": piece}, nil, nil)
		if reply.Stall {
			select {
			case <-ctx.Done():
			case <-s.release:
			}
			return
		}
	}
	for i, c := range reply.ToolCalls {
		send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Function.Name, "arguments": ""}}}}, nil, nil)
		for _, piece := range split(c.Function.Arguments, 2) {
			send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}, nil, nil)
		}
	}
	send(nil, reply.Finish, nil)
	if !reply.NoUsage && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(nil, nil, usage(reply))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func usage(r Reply) map[string]int {
	return map[string]int{"prompt_tokens": r.PromptTokens, "completion_tokens": r.CompletionTokens, "total_tokens": r.PromptTokens + r.CompletionTokens}
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": strconv.Itoa(status)}})
}

// split cuts s into at most n pieces of about equal length; "" gives none.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, (len(s)+n-1)/n)
	var out []string
	for len(s) > 0 {
		k := min(size, len(s))
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func promptTokens(req Request) int {
	n := 0
	for _, m := range req.Messages {
		n += 4 + len(m.Content)/4 + len(argsOf(m.ToolCalls))/4
	}
	return max(1, n)
}

func argsOf(calls []ToolCall) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString(c.Function.Name)
		b.WriteString(c.Function.Arguments)
	}
	return b.String()
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
