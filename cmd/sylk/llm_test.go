package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
)

// fakeLLMKey finds a script's fake LLM in its values.
type fakeLLMKey struct{}

// fakeLLM is a script's fake OpenAI-compatible endpoint: an llmtest.Server
// answering from the replies of a file.
type fakeLLM struct {
	srv *llmtest.Server

	mu        sync.Mutex
	replies   []fakeReply
	used      []bool
	unmatched []string
}

// fakeReply is one line of an llmserve file. System, when set, must occur in
// the request's system prompt (the Guide's, the Architect's, an Engineer's):
// a request takes the first unused reply that matches it, so agents calling
// at once get the replies meant for them. The answer is JSON (encoded as the
// message content), Content, ToolCalls, or an error Status.
type fakeReply struct {
	System string `json:"system"`
	// Last, when set, must be in the request's last message.
	Last      string          `json:"last"`
	JSON      json.RawMessage `json:"json"`
	Content   string          `json:"content"`
	ToolCalls []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
	Status int `json:"status"`
}

func (f *fakeLLM) respond(req llmtest.Request) llmtest.Reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	sys := req.System()
	for i, r := range f.replies {
		if f.used[i] || !strings.Contains(sys, r.System) || !strings.Contains(req.Last(), r.Last) {
			continue
		}
		f.used[i] = true
		switch {
		case r.Status != 0:
			return llmtest.Status(r.Status)
		case len(r.ToolCalls) > 0:
			var calls []llmtest.ToolCall
			for _, c := range r.ToolCalls {
				calls = append(calls, llmtest.Call(c.ID, c.Name, c.Arguments))
			}
			return llmtest.Tools(calls...)
		case len(r.JSON) > 0:
			return llmtest.Text(string(r.JSON))
		}
		return llmtest.Text(r.Content)
	}
	first, _, _ := strings.Cut(sys, "\n")
	f.unmatched = append(f.unmatched, fmt.Sprintf("%.80s / last message %.80q", first, req.Last()))
	// Refused for good, so the agent reports it rather than retrying.
	return llmtest.Status(400)
}

// scriptTB lets llmtest.New run under a script: it only registers cleanups
// (its other methods are never called with a Respond function set).
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (s scriptTB) Cleanup(f func()) { s.ts.Defer(f) }
func (s scriptTB) Helper()          {}

// llmserve FILE: start a fake OpenAI-compatible endpoint answering from FILE
// (one fakeReply JSON object per line; blank lines and # comments are
// skipped) and put its base URL in $LLM_URL. It stops with the script.
func cmdLLMServe(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: llmserve FILE")
	}
	f := ts.Value(fakeLLMKey{}).(*fakeLLM)
	if f.srv != nil {
		ts.Fatalf("llmserve: a fake LLM runs already")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r fakeReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			ts.Fatalf("%s:%d: %v", args[0], n, err)
		}
		f.replies = append(f.replies, r)
	}
	ts.Check(sc.Err())
	f.used = make([]bool, len(f.replies))
	f.srv = llmtest.New(scriptTB{ts: ts})
	f.srv.Respond(f.respond)
	ts.Setenv("LLM_URL", f.srv.URL())
}

// llmcalls N: the fake LLM has received exactly N requests, every one of
// them answered from the file.
func cmdLLMCalls(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: llmcalls N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	f := ts.Value(fakeLLMKey{}).(*fakeLLM)
	if f.srv == nil {
		ts.Fatalf("llmcalls: no llmserve")
	}
	f.mu.Lock()
	unmatched := f.unmatched
	f.mu.Unlock()
	if len(unmatched) > 0 {
		ts.Fatalf("requests with no reply in the file:\n%s", strings.Join(unmatched, "\n"))
	}
	if got := f.srv.Calls(); (got == want) == neg {
		ts.Fatalf("the fake LLM received %d requests; want %s%d", got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}

// embedcalls N: the fake LLM has received exactly N /embeddings requests.
func cmdEmbedCalls(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: embedcalls N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	f := ts.Value(fakeLLMKey{}).(*fakeLLM)
	if f.srv == nil {
		ts.Fatalf("embedcalls: no llmserve")
	}
	if got := f.srv.EmbedCalls(); (got == want) == neg {
		ts.Fatalf("the fake LLM received %d /embeddings requests; want %s%d", got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}

// waitidle DATADIR AGENT...: poll until each agent's consumer exists and has
// nothing pending or unacknowledged (a server has worked through the stream).
func cmdWaitIdle(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: waitidle DATADIR AGENT...")
	}
	js, ctx, done := extJetStream(ts, args[0], 60*time.Second)
	defer done()
	for _, agent := range args[1:] {
		idle := brokertest.Poll(60*time.Second, func() bool {
			c, err := js.Consumer(ctx, broker.Stream, agents.ConsumerName(agent))
			if err != nil {
				if !errors.Is(err, jetstream.ErrConsumerNotFound) {
					ts.Check(err)
				}
				return false
			}
			info, err := c.Info(ctx)
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0
		})
		if !idle {
			ts.Fatalf("agent %s not idle within 60s", agent)
		}
	}
}

// waitsub DATADIR SUBJECT: poll until some client subscribes to SUBJECT on
// core NATS (a background 'tail --live' is listening). It asks with a request:
// with no subscriber the server says so at once.
func cmdWaitSub(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitsub DATADIR SUBJECT")
	}
	nc := extConnect(ts, args[0])
	defer nc.Close()
	subscribed := brokertest.Poll(30*time.Second, func() bool {
		_, err := nc.Request(args[1], []byte("probe"), 100*time.Millisecond)
		return !errors.Is(err, nats.ErrNoResponders) // a subscriber that does not answer: a timeout
	})
	if !subscribed {
		ts.Fatalf("nobody subscribed to %s within 30s", args[1])
	}
}
