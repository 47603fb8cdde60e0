package llm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/schemas"
)

func (g *gate) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// Waiting calls are admitted by priority, then in arrival order.
func TestGateAdmitsByPriorityThenArrival(t *testing.T) {
	g := newGate(1, time.Now)
	ctx := context.Background()
	hold, err := g.acquire(ctx, schemas.PriorityExecution)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, w := range []struct {
		name string
		prio schemas.Priority
	}{
		{"background", schemas.PriorityBackground}, {"user", schemas.PriorityUserInteractive},
		{"exec-1", schemas.PriorityExecution}, {"exec-2", schemas.PriorityExecution}, {"planning", schemas.PriorityPlanning},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := g.acquire(ctx, w.prio)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, w.name)
			mu.Unlock()
			release()
		}()
		brokertest.Eventually(t, 5*time.Second, "queued", func() bool { return g.queued() == i+1 })
	}
	hold()
	wg.Wait()
	want := []string{"user", "planning", "exec-1", "exec-2", "background"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("admitted %v, want %v", order, want)
		}
	}
}

// A pause holds new calls until it ends; a waiter whose context ends leaves
// the queue.
func TestGatePauseAndCancel(t *testing.T) {
	g := newGate(2, time.Now)
	defer g.close()
	if !g.pause(time.Now().Add(150 * time.Millisecond)) {
		t.Fatal("first pause did not start an episode")
	}
	if g.pause(time.Now().Add(200 * time.Millisecond)) {
		t.Fatal("extending a pause started another episode")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := g.acquire(ctx, schemas.PriorityExecution)
		errc <- err
	}()
	brokertest.Eventually(t, 5*time.Second, "queued", func() bool { return g.queued() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if g.queued() != 0 {
		t.Fatal("a cancelled waiter stayed in the queue")
	}
	start := time.Now()
	release, err := g.acquire(context.Background(), schemas.PriorityExecution)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("admitted after %s, during the pause", waited)
	}
}

func TestConfig(t *testing.T) {
	env := map[string]string{"SYLK_LLM_BASE_URL": "http://localhost:11434/v1", "SYLK_LLM_MODEL": "llama3", "OPENAI_API_KEY": "k", "SYLK_LLM_BUDGET_SESSION": "5000"}
	var c Config
	if err := c.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.BaseURL != "http://localhost:11434/v1" || c.Model != "llama3" || c.APIKey != "k" || c.Budgets.Session != 5000 || c.Provider != "localhost" {
		t.Fatalf("config %+v", c)
	}
	for name, bad := range map[string]Config{
		"no model":        {BaseURL: "http://x/v1"},
		"openai, no key":  {Model: "gpt-4.1"},
		"bad url":         {Model: "m", BaseURL: "localhost:11434"},
		"negative budget": {Model: "m", BaseURL: "http://x/v1", Budgets: Budgets{Task: -1}},
	} {
		bad.EnsureDefaults()
		err := bad.Validate()
		if err == nil {
			t.Errorf("%s: valid", name)
		}
		if name == "no model" && !errors.Is(err, ErrNotConfigured) {
			t.Errorf("no model: %v, want ErrNotConfigured", err)
		}
	}
	if err := c.FromEnv(func(k string) (string, bool) { return "many", k == "SYLK_LLM_BUDGET_TASK" }); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad budget: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"2": 2 * time.Second, "0.5": 500 * time.Millisecond, "Thu, 01 Jan 2026 00:00:30 GMT": 30 * time.Second,
	} {
		if got, ok := parseRetryAfter(in, now); !ok || got != want {
			t.Errorf("%q: %s %v, want %s", in, got, ok, want)
		}
	}
	if _, ok := parseRetryAfter("soon", now); ok {
		t.Error("parsed a bad Retry-After")
	}
}
