package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func appendUsage(t *testing.T, log *events.Log, session string, prompt, completion int) uint64 {
	t.Helper()
	env, err := schemas.New(schemas.TypeLLMUsage, session, "architect", "user", time.Now(), schemas.LLMUsage{
		CallID: schemas.NewID(), Agent: "architect", Model: "m1", CostUSD: 0.5,
		Usage: schemas.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion},
	})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := log.Append(brokertest.Context(t), env)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestUsageFollowsTheStream: the usage counts the calls recorded before the
// view started and those after, each once, and a page that heard of an
// llm_usage event finds it counted.
func TestUsageFollowsTheStream(t *testing.T) {
	w, log, srv := startWeb(t, 0, func(log *events.Log) {
		appendUsage(t, log, "S1", 100, 10)
		appendUsage(t, log, "S2", 200, 20)
	})
	view := openEvents(t, srv.URL+"/api/events?type=llm_usage", w.Token())
	brokertest.Eventually(t, 10*time.Second, "the live view", func() bool { return w.Watching() == 1 })
	last := appendUsage(t, log, "S1", 300, 30)
	brokertest.Eventually(t, 10*time.Second, "the view hears of the new call", func() bool {
		got := view.got()
		return len(got) > 0 && got[len(got)-1] == last
	})
	code, body := do(t, "POST", srv.URL+"/api/usage", w.Token(), nil, `{}`)
	var u usage
	if code != http.StatusOK || json.Unmarshal([]byte(body), &u) != nil {
		t.Fatalf("usage: %d %s", code, body)
	}
	if u.Total.Calls != 3 || u.Total.TotalTokens != 660 || u.BySession["S1"].TotalTokens != 440 || u.ByModel["m1"].CostUSD != 1.5 {
		t.Errorf("usage %+v, want 3 calls, 660 tokens (440 in S1), $1.5 for m1", u.Report)
	}
	code, body = do(t, "POST", srv.URL+"/api/usage", w.Token(), nil, `{"session":"S2"}`)
	if err := json.Unmarshal([]byte(body), &u); code != http.StatusOK || err != nil || u.Total.Calls != 1 || u.Total.TotalTokens != 220 {
		t.Errorf("usage of S2: %d %s", code, body)
	}
}

// TestOperationsRefuseBadInput: each action of the page says what is wrong
// with a request, and a secret in an answer is refused and recorded, not
// stored.
func TestOperationsRefuseBadInput(t *testing.T) {
	w, log, srv := startWeb(t, 0, nil)
	for _, c := range []struct {
		path, body string
		code       int
		says       string
	}{
		{"/api/dlq/resend", `{"id": 99}`, http.StatusNotFound, "no dead letter 99"},
		{"/api/dlq/resend", `{"id": "one"}`, http.StatusBadRequest, `{"id": DEAD_LETTER_ID}`},
		{"/api/question/answer", `{"session": "S1", "question": "q1", "answer": "  "}`, http.StatusBadRequest, "the answer is empty"},
		{"/api/question/answer", `{"session": "S 1", "question": "q1", "answer": "B"}`, http.StatusBadRequest, "session"},
		{"/api/question/answer", `{"session": "S1", "question": "q1", "answer": "use ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`, http.StatusUnprocessableEntity, "the text holds a secret"},
		{"/api/node", `{"session": "S1", "dag": "", "node": "n"}`, http.StatusBadRequest, "dag"},
		{"/api/usage", `{"session": "a.b"}`, http.StatusBadRequest, "session"},
		{"/api/usage", `[`, http.StatusBadRequest, "the body must be JSON"},
	} {
		code, body := do(t, "POST", srv.URL+c.path, w.Token(), nil, c.body)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("POST %s %s: %d %q, want %d saying %q", c.path, c.body, code, body, c.code, c.says)
		}
	}
	evs, err := log.Read(brokertest.Context(t), events.Filter{Session: "S1", Type: schemas.TypePromptRejected}.Subject(), events.Cursor{}, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d prompt_rejected events (%v), want the refused answer's", len(evs), err)
	}
	if raw, _ := json.Marshal(evs[0].Env); strings.Contains(string(raw), "ghp_abcdefghijklmnopqrstuvwxyz0123456789") {
		t.Error("the refused answer's secret was stored")
	}
	code, body := do(t, "POST", srv.URL+"/api/dlq", w.Token(), nil, `{}`)
	if code != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Errorf("no dead letters: %d %s", code, body)
	}
}
