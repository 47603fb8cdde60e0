package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// bodies keeps the body of each request it carries.
type bodies struct {
	mu   sync.Mutex
	sent [][]byte
}

func (b *bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.sent = append(b.sent, body)
	b.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(req)
}

// The body the provider sends, its messages and tools encoded by the
// provider and spliced into go-openai's body of the rest, says what
// go-openai's encoding of the whole request says, streamed or not.
func TestRequestBodyIsGoOpenAIs(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	sent := &bodies{}
	cfg := (&Config{BaseURL: srv.URL(), Model: "fake", Timeout: 5 * time.Second}).EnsureDefaults()
	p := newProvider(cfg, &http.Client{Transport: sent}, time.Now)
	msgs := []schemas.LLMMessage{
		{Role: "system", Content: "You are <the> Engineer & \"careful\"\n\tunicode: é ✓"},
		{Role: "user", Content: "add Add(a, b int) int"},
		{Role: "assistant", ToolCalls: []schemas.LLMToolCall{{ID: "c1", Name: "exec", Arguments: `{"cmd": "go test ./..."}`}}},
		{Role: "tool", ToolCallID: "c1", Name: "exec", Content: "ok  \tcalc\t0.01s"},
	}
	specs := []tools.ToolSpec{
		{Name: "exec", Description: "Run a command.", Parameters: json.RawMessage(`{"type": "object",
			"properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}`)},
		{Name: "read", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	// The same tools again (their encodings kept), then one of them changed.
	changed := slices.Clone(specs)
	changed[0].Description = "Run a command in the work directory."
	for i, stream := range []bool{false, true, false, true} {
		for _, jsonMode := range []bool{false, true} {
			req := p.request("fake", msgs, specs, jsonMode, 100)
			if i >= 2 {
				req = p.request("fake", msgs, changed, jsonMode, 100)
			}
			if out := p.call(context.Background(), req, stream, func(string, string) {}); out.err != nil {
				t.Fatalf("stream %v: %v", stream, out.err)
			}
			// What go-openai's own request builder would have sent.
			if stream {
				req.Stream, req.StreamOptions = true, &openai.StreamOptions{IncludeUsage: true}
			}
			want, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			sent.mu.Lock()
			got := sent.sent[len(sent.sent)-1]
			sent.mu.Unlock()
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("stream %v: the body sent is not JSON: %v\n%s", stream, err, got)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("stream %v, json %v: sent\n%s\nwant\n%s", stream, jsonMode, got, want)
			}
		}
	}
}

// A request the provider does not encode itself goes to go-openai whole:
// one whose tool schema is not JSON is refused as go-openai refuses it, and
// never sent.
func TestRequestGoOpenAICannotEncodeIsNotSent(t *testing.T) {
	srv := llmtest.New(t)
	sent := &bodies{}
	cfg := (&Config{BaseURL: srv.URL(), Model: "fake", Timeout: 5 * time.Second}).EnsureDefaults()
	p := newProvider(cfg, &http.Client{Transport: sent}, time.Now)
	req := p.request("fake", []schemas.LLMMessage{{Role: "user", Content: "hi"}},
		[]tools.ToolSpec{{Name: "bad", Parameters: json.RawMessage(`{"type":`)}}, false, 0)
	if _, _, ok := p.tools.split(req); ok {
		t.Fatal("split encoded a tool schema that is not JSON")
	}
	out := p.call(context.Background(), req, false, nil)
	if out.err == nil {
		t.Fatal("a tool schema that is not JSON was sent")
	}
	if len(sent.sent) != 0 {
		t.Fatalf("%d requests sent", len(sent.sent))
	}
}
