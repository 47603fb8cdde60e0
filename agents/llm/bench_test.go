package llm_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

var benchLatency = flag.Duration("llm.latency", 50*time.Millisecond,
	"the fake model's time per call in BenchmarkLLMStep (the issue's figure is for 1s)")

// BenchmarkLLMStep measures the runtime's overhead on one LLM step (one
// Complete of an agent loop: the record lookup, budget check, gate, redaction,
// the llm_request append, the call, the llm_response and llm_usage append,
// live chunks when streaming) against a fake endpoint taking -llm.latency per
// call. The overhead is everything but the HTTP call, measured around it, in
// µs; the target is at most 1% of a 1 s model latency (10 ms).
func BenchmarkLLMStep(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "whole"
		if stream {
			name = "streamed"
		}
		b.Run(name, func(b *testing.B) { benchStep(b, stream) })
	}
}

func benchStep(b *testing.B, stream bool) {
	st := llmtest.NewStack(b)
	srv := llmtest.New(b)
	srv.SetLatency(*benchLatency)
	answer := strings.Repeat("The loader now rejects an empty name. ", 20)
	srv.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: answer, Chunks: 40} })
	red, err := tools.NewRedactor(tools.SecretOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tm := llmtest.NewTiming()
	c, err := llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: !stream, Budgets: llm.Budgets{Global: 1 << 40, Session: 1 << 40, Task: 1 << 40}},
		llm.Deps{Records: st.Store, Live: st.Broker.Conn(), Redactor: red, HTTPClient: &http.Client{Transport: tm}, Usage: llm.NewLedger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// A conversation of a working agent: a system prompt, the task and ten
	// tool rounds of about 2 KiB each.
	conv := []schemas.LLMMessage{{Role: "system", Content: strings.Repeat("You are the Engineer. ", 50)}, {Role: "user", Content: "add input validation to the config loader"}}
	for i := range 10 {
		id := fmt.Sprintf("c%d", i)
		conv = append(conv, schemas.LLMMessage{Role: "assistant", ToolCalls: []schemas.LLMToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"config.go"}`}}},
			schemas.LLMMessage{Role: "tool", ToolCallID: id, Content: strings.Repeat("func Load(name string) error { return nil }\n", 45)})
	}

	var (
		mu      sync.Mutex
		inCalls time.Duration
		done    = make(chan error, 1)
	)
	st.Run("engineer", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		// Warm up the connection and the stream's paths, then measure.
		if _, _, err := c.Complete(ctx, d, llm.Request{Key: "warm", Messages: conv, DAGID: "d1", NodeID: "n1"}); err != nil {
			done <- err
			return nil, nil
		}
		tm.Reset()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			_, _, err := c.Complete(ctx, d, llm.Request{Key: fmt.Sprintf("step/%d", i), Messages: conv, Seen: len(conv) - 2, DAGID: "d1", NodeID: "n1"})
			mu.Lock()
			inCalls += time.Since(start)
			mu.Unlock()
			if err != nil {
				done <- err
				return nil, nil
			}
		}
		b.StopTimer()
		done <- nil
		return nil, nil
	}))
	st.Send("S1", "user", "engineer", schemas.TypeUserInput, schemas.UserInput{Text: "go"})
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	httpTime, httpCalls := tm.Total()
	if httpCalls != b.N {
		b.Fatalf("%d HTTP calls for %d steps", httpCalls, b.N)
	}
	overhead := (inCalls - httpTime) / time.Duration(b.N)
	b.ReportMetric(float64(overhead.Microseconds()), "overhead-µs/step")
	// An upper bound: everything above the model's latency, the fake
	// server's own work and the loopback transfer included.
	b.ReportMetric(float64((inCalls/time.Duration(b.N) - *benchLatency).Microseconds()), "above-latency-µs/step")
	b.ReportMetric(100*float64(overhead)/float64(*benchLatency), "overhead-%-of-latency")
	b.ReportMetric(100*float64(overhead)/float64(time.Second), "overhead-%-of-1s")
}
