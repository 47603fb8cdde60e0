package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
)

// chromium is Debian's headless-capable browser; `make test` installs it
// (make chromium) when it is missing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is missing: `make chromium` (part of `make test`) installs Debian's package, or apt-get install chromium")
	return ""
}

// TestWebView drives the web view of a real `sylk serve --http` in headless
// Chromium: a request without the token is refused; the page opened with it
// draws a plan's DAG and the node changes colour as it runs, without a
// reload; a plan waiting for approval is approved from the page and runs.
func TestWebView(t *testing.T) {
	browser := chromium(t)
	bin := sylkBinary(t)
	dir := t.TempDir()
	data, work := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	// The node runs until the test lets it finish, so the page sees it run.
	os.WriteFile(filepath.Join(work, "plan.yaml"), []byte(`name: watched
nodes:
  - {id: first, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: slow, agent: engineer, tool: exec, args: {argv: [sh, -c, "while [ ! -f finish ]; do sleep 0.05; done"]}, depends_on: [first], timeout: 2m}
`), 0o644)

	_, srv, info := serveWeb(t, bin, data, work, func(req llmtest.Request) llmtest.Reply {
		switch sys := req.System(); {
		case strings.Contains(sys, "You are the Guide"):
			return llmtest.Text(`{"intent_type": "EXPLICIT", "confidence": 0.9, "reason": "bounded", "assumptions_explicit": true, "scope_bounded": true}`)
		case strings.Contains(sys, "You are the Architect"):
			return llmtest.Text(`{"action": "plan", "rationale": "One step.", "plan": {"name": "from the page", "nodes": [{"id": "touch", "agent": "engineer", "tool": "exec", "args": {"argv": ["touch", "approved.txt"]}}]}}`)
		}
		return llmtest.Status(400)
	})
	defer srv.stop(t)

	// Without the token: refused, the page and its API alike.
	for _, path := range []string{"/", "/api/events", "/static/app.js"} {
		resp, err := http.Get(info.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s, want 401", path, resp.Status)
		}
	}
	resp, err := http.Post(info.HTTP+"/api/plan/approve", "application/json", strings.NewReader(`{"session":"W2","plan":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /api/plan/approve without the token: %s, want 401", resp.Status)
	}

	out, err := exec.Command(bin, "--data", data, "web", "url", "--json").Output()
	if err != nil {
		t.Fatalf("sylk web url: %v", err)
	}
	var u struct{ URL, Base, Token string }
	if err := json.Unmarshal(out, &u); err != nil || !strings.HasPrefix(u.URL, info.HTTP+"/?token=") {
		t.Fatalf("sylk web url --json: %s (%v)", out, err)
	}
	resp, err = http.Get(info.HTTP + "/?token=not-" + u.Token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %s, want 401", resp.Status)
	}

	b := openBrowser(t, browser, dir, 3*time.Minute)
	do, eval := b.do, b.eval
	do("open the page with the token", countStreams, chromedp.Navigate(u.URL), visible(`#live.up`))
	// One stream serves the state and the event log (its since, no filter).
	if s := eval(`openStreams()`); s != "?since=10m" {
		t.Errorf("the page opened the streams %q, want the one unfiltered stream ?since=10m", s)
	}
	// A marker that a reload would lose.
	eval(`window.notReloaded = "yes"`)
	if loc := eval(`location.href`); strings.Contains(loc, "token=") {
		t.Errorf("the token stays in the address bar: %s", loc)
	}

	// A plan started from the CLI: the page draws it and follows its nodes.
	sylk(t, bin, data, work, "session", "new", "--id", "W1", "--no-switch")
	sylk(t, bin, data, work, "run", "plan.yaml", "--session", "W1", "--detach")
	do("the session appears and its DAG is drawn",
		click(`#sessions tr[data-session="W1"]`),
		visible(`g.node[data-node="first"][data-state="succeeded"]`),
		visible(`g.node[data-node="slow"][data-state="running"]`))
	os.WriteFile(filepath.Join(work, "finish"), nil, 0o644)
	do("the running node turns succeeded, without a reload", visible(`g.node.st-succeeded[data-node="slow"]`))
	if fill := eval(`getComputedStyle(document.querySelector('g.node[data-node="slow"] rect')).fill`); fill != "rgb(159, 224, 168)" {
		t.Errorf("a succeeded node is drawn in %s, want the succeeded green", fill)
	}
	if eval(`String(window.notReloaded)`) != "yes" {
		t.Error("the page was reloaded")
	}
	do("a node's recorded tool call on click", click(`g.node[data-node="slow"]`), visible(`#node-detail pre.call`))
	if calls := eval(`document.querySelector("#node-detail pre.call").textContent`); !strings.Contains(calls, `"exit_code": 0`) {
		t.Errorf("the node's tool result: %s", calls)
	}

	// The replay timeline: the session as it stood after any of its events.
	do("the session as of its first dispatch, from the timeline",
		click(`#timeline li[data-type="task_dispatch"]`),
		visible(`#as-of g.node[data-node="slow"]`))
	if st := eval(`document.querySelector('#as-of g.node[data-node="slow"]').dataset.state`); st == "succeeded" || st == "running" {
		t.Errorf("as of the first dispatch the slow node is %s, want it not started", st)
	}
	do("the session as of its outcome", click(`#timeline li[data-type="workflow_complete"]`),
		visible(`#as-of g.node[data-node="slow"][data-state="succeeded"]`))
	if s := eval(`openStreams()`); s != "?session=W1&since=all ?since=10m" {
		t.Errorf("with session W1 shown the page has the streams %q, want its timeline's and the page's", s)
	}

	// A request's plan waits for approval: approved from the page, it runs.
	sylk(t, bin, data, work, "session", "new", "--id", "W2", "--no-switch")
	sylk(t, bin, data, work, "run", "write approved.txt", "--session", "W2")
	do("approve the waiting plan from the page",
		click(`nav button[data-tab="waiting"]`),
		click(`#waiting .plan[data-state="open"] button.approve`),
		visible(`#waiting p.none`),
		click(`nav button[data-tab="sessions"]`),
		click(`#sessions tr[data-session="W2"]`),
		visible(`g.node[data-node="touch"][data-state="succeeded"]`))
	if w := eval(`document.querySelector("#waiting").textContent`); !strings.Contains(w, "Nothing waits on you") {
		t.Errorf("after the approval the page says %q", w)
	}

	// The event log: the page's stream fills it, both sessions' events; a
	// filter gets a stream of its own, filtered by the server, back-filled
	// from since; an empty filter goes back to the page's stream.
	do("the event log shows the page's stream",
		click(`nav button[data-tab="events"]`),
		visible(`#events tr[data-session="W1"][data-type="workflow_complete"]`),
		visible(`#events tr[data-session="W2"][data-type="workflow_complete"]`))
	filter := func(session string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const f = document.querySelector("#event-filter");
			f.elements.session.value = %q; f.requestSubmit(); })()`, session))
	}
	do("a filtered log shows the past of its session only",
		filter("W1"), visible(`#events tr[data-session="W1"][data-type="session_create"]`))
	if n := eval(`String(document.querySelectorAll('#events tbody tr:not([data-session="W1"])').length)`); n != "0" {
		t.Errorf("the log filtered on session W1 shows %s rows of other sessions", n)
	}
	if s := eval(`openStreams()`); s != "?session=W1&since=10m ?session=W2&since=all ?since=10m" {
		t.Errorf("with a filtered log the page has the streams %q, want the log's, the timeline's and the page's", s)
	}
	do("the log without a filter is the page's stream again",
		filter(""), visible(`#events tr[data-session="W2"][data-type="workflow_complete"]`),
		visible(`#events tr[data-session="W1"][data-type="workflow_complete"]`))
	if s := eval(`openStreams()`); s != "?session=W2&since=all ?since=10m" {
		t.Errorf("with the log unfiltered again the page has the streams %q, want the timeline's and the page's", s)
	}
	if eval(`String(window.notReloaded)`) != "yes" {
		t.Error("the page was reloaded")
	}
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(90))
	if err != nil || len(shot) == 0 {
		t.Errorf("screenshot: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "web.jpg"), shot, 0o644)
	if _, err := os.Stat(filepath.Join(work, "approved.txt")); err != nil {
		t.Errorf("the approved plan did not run: %v", err)
	}
}

// serveWeb starts `sylk serve --http` in work on data, its LLM the test
// server answering with reply, and returns them with the server's info.
func serveWeb(t *testing.T, bin, data, work string, reply func(llmtest.Request) llmtest.Reply) (*llmtest.Server, *serveProc, broker.Info) {
	t.Helper()
	llmSrv := llmtest.New(t)
	llmSrv.Respond(reply)
	t.Setenv("SYLK_LLM_BASE_URL", llmSrv.URL())
	t.Setenv("SYLK_LLM_MODEL", "fake")
	srv := startServe(t, bin, data, work, "--http", "127.0.0.1:0")
	info, err := broker.ReadInfo(data)
	if err != nil || info.HTTP == "" {
		srv.stop(t)
		t.Fatalf("server.json names no HTTP listener: %+v %v", info, err)
	}
	return llmSrv, srv, info
}

// browser is a headless Chromium page a test drives.
type browser struct {
	t   *testing.T
	ctx context.Context
	// state, if set, says what the server holds when a step fails.
	state func() string
}

// openBrowser starts Chromium with its profile and its temporary files (the
// singleton socket's directory) in dir; it ends with the test or after
// within.
func openBrowser(t *testing.T, path, dir string, within time.Duration) *browser {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(dir, "chromium")), chromedp.Env("TMPDIR="+dir))...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel(); cancel() })
	return &browser{t: t, ctx: bctx}
}

// do runs steps, failing the test with the page's state when one fails.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		state := ""
		if b.state != nil {
			state = b.state()
		}
		b.t.Fatalf("%s: %v\npage: %s\n%s", what, err, html, state)
	}
}

// eval is the string value of a JavaScript expression in the page.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// countStreams makes the page keep its open EventSources: openStreams()
// lists their queries, sorted.
var countStreams = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
		const open = new Set();
		window.EventSource = class extends window.EventSource {
			constructor(...args) { super(...args); open.add(this); }
			close() { open.delete(this); super.close(); }
		};
		window.openStreams = () => [...open].map((s) => new URL(s.url).search).sort().join(" ");
	})()`})
	return err
})

// click waits for sel, then clicks what matches it at that moment: the page
// redraws its lists as events come, so a node found before may be gone.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new MouseEvent("click", {bubbles: true}))`, sel)))
}

func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// sylk runs a sylk command that must succeed.
func sylk(t *testing.T, bin, data, work string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--data", data}, args...)...)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sylk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestWebViewOperations drives the operator's parts of a real `sylk serve
// --http` page in headless Chromium: a dead letter listed with its reason and
// resent from the page until it reaches its agent again; a clarification
// answered from the page reaching the Architect, whose plan is approved
// there and runs; a clicked node's test results and LLM exchanges; and the
// usage and cost, equal to what `sylk usage` reports.
func TestWebViewOperations(t *testing.T) {
	path := chromium(t)
	bin := sylkBinary(t)
	dir := t.TempDir()
	data, work := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	os.MkdirAll(filepath.Join(work, ".sylk"), 0o755)
	os.WriteFile(filepath.Join(work, ".sylk", "config.yaml"), []byte("llm: {prices: {fake: {input: 3, output: 15}}}\n"), 0o644)

	const answer = "B, the YAML one"
	llmSrv, srv, info := serveWeb(t, bin, data, work, func(req llmtest.Request) llmtest.Reply {
		switch sys := req.System(); {
		case strings.Contains(sys, "You are the Guide"):
			return llmtest.Text(`{"intent_type": "AMBIGUOUS", "confidence": 0.4, "reason": "which config?", "question": "Which config: A or B?", "options": ["A: the JSON one", "B: the YAML one"]}`).WithUsage(100, 20)
		case strings.Contains(sys, "You are the Architect"):
			for _, m := range req.Messages {
				if strings.Contains(m.Content, answer) {
					return llmtest.Text(`{"action": "plan", "rationale": "The YAML one.", "plan": {"name": "yaml", "nodes": [
						{"id": "check", "agent": "inspector", "prompt": "check the YAML loader"},
						{"id": "tests", "agent": "tester", "tool": "exec", "args": {"argv": ["sh", "-c", "printf '=== RUN   TestLoad\n--- PASS: TestLoad (0.00s)\n=== RUN   TestSave\n--- PASS: TestSave (0.00s)\nPASS\nok  \tconfig\t0.01s\n'"]}, "depends_on": ["check"]}]}}`).WithUsage(300, 60)
				}
			}
			return llmtest.Status(400)
		case strings.Contains(sys, "You are the Inspector"):
			// A verdict needs evidence: a tool first, then the verdict.
			for _, m := range req.Messages {
				if m.Role == "tool" {
					return llmtest.Text(`{"passed": true, "summary": "the YAML loader checks its input", "issues": []}`).WithUsage(200, 40)
				}
			}
			return llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["ls"]}`)).WithUsage(150, 10)
		}
		return llmtest.Status(400)
	})
	defer srv.stop(t)
	for _, p := range []string{"/api/dlq", "/api/dlq/resend", "/api/question/answer", "/api/usage", "/api/node"} {
		resp, err := http.Post(info.HTTP+p, "application/json", strings.NewReader(`{"id":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without the token: %s, want 401", p, resp.Status)
		}
	}
	var u struct{ URL string }
	if err := json.Unmarshal([]byte(sylk(t, bin, data, work, "web", "url", "--json")), &u); err != nil {
		t.Fatal(err)
	}
	b := openBrowser(t, path, dir, 5*time.Minute)
	b.state = func() string {
		out, _ := exec.Command(bin, "--data", data, "session", "show", "W3").CombinedOutput()
		log, _ := os.ReadFile(data + ".log")
		return fmt.Sprintf("sylk session show W3:\n%s\nserver log (end):\n%s", out, log[max(0, len(log)-4000):])
	}
	b.do("open the page", chromedp.Navigate(u.URL), visible(`#live.up`))
	b.eval(`window.notReloaded = "yes"`)

	// A dead letter: bytes the Guide cannot read, from an outside client.
	nc, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(brokertest.Context(t), "sylk.v1.D1.outsider.guide.user_input", []byte("not msgpack")); err != nil {
		t.Fatal(err)
	}
	b.do("the dead letter appears, with its reason, without a reload",
		click(`nav button[data-tab="dlq"]`),
		visible(`#dlq tr[data-dlq="1"][data-consumer="agent-guide"]`))
	if reason := b.eval(`document.querySelector('#dlq tr[data-dlq="1"] td.reason').textContent`); !strings.Contains(reason, "invalid envelope") {
		t.Errorf("the dead letter's reason on the page: %q", reason)
	}
	b.do("resend it from the page", click(`#dlq tr[data-dlq="1"] button.resend`), visible(`#dlq tr[data-dlq="1"] .resent[data-seq]`))
	resentSeq := b.eval(`document.querySelector('#dlq tr[data-dlq="1"] .resent').dataset.seq`)
	// The Guide got the resent bytes: it could not read them either, so
	// they are a new dead letter of its consumer, naming the resent seq.
	b.do("the resent message reaches the Guide, which gives it up again",
		visible(`#dlq tr[data-consumer="agent-guide"][data-stream-seq="`+resentSeq+`"]`))
	var resent struct {
		Subject string `json:"subject"`
	}
	for _, line := range strings.Split(strings.TrimSpace(sylk(t, bin, data, work, "dlq", "ls", "--json")), "\n") {
		var dl struct {
			StreamSeq string `json:"stream_seq"`
			Subject   string `json:"subject"`
		}
		json.Unmarshal([]byte(line), &dl)
		if dl.StreamSeq == resentSeq {
			resent.Subject = dl.Subject
		}
	}
	if resent.Subject != "sylk.v1.D1.outsider.guide.user_input" {
		t.Errorf("sylk dlq ls shows no dead letter of seq %s on the original subject", resentSeq)
	}

	// A question before the plan, answered from the page.
	sylk(t, bin, data, work, "session", "new", "--id", "W3", "--no-switch")
	sylk(t, bin, data, work, "run", "make the config better", "--session", "W3")
	b.do("answer the question from the page",
		click(`nav button[data-tab="waiting"]`),
		visible(`#waiting .plan[data-state="open"] textarea`),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const a = document.querySelector('#waiting .plan[data-state="open"] textarea');
			a.value = %q; a.dispatchEvent(new Event("input")); })()`, answer)),
		click(`#waiting .plan[data-state="open"] button.answer`),
		// The Architect plans with the answer: its plan waits for approval.
		visible(`#waiting .plan[data-state="open"] button.approve`))
	architect := 0
	for _, req := range llmSrv.Requests() {
		if strings.Contains(req.System(), "You are the Architect") {
			for _, m := range req.Messages {
				if strings.Contains(m.Content, answer) {
					architect++
				}
			}
		}
	}
	if architect == 0 {
		t.Error("the Architect never saw the answer given on the page")
	}
	b.do("approve the plan; it runs",
		click(`#waiting .plan[data-state="open"] button.approve`),
		visible(`#waiting p.none`),
		click(`nav button[data-tab="sessions"]`),
		click(`#sessions tr[data-session="W3"]`),
		visible(`g.node[data-node="tests"][data-state="succeeded"]`))

	b.do("a test node's results on click", click(`g.node[data-node="tests"]`), visible(`#node-detail .tests`))
	if tests := b.eval(`document.querySelector("#node-detail .tests h4").textContent`); !strings.Contains(tests, "2 passed, 0 failed") {
		t.Errorf("the test node's results: %q", tests)
	}
	if ev := b.eval(`document.querySelector("#node-detail .tests pre.evidence").textContent`); !strings.Contains(ev, "=== RUN   TestSave") || !strings.Contains(ev, "ok  \tconfig") {
		t.Errorf("the test node's evidence: %q", ev)
	}
	b.do("a prompt node's LLM exchanges on click", click(`g.node[data-node="check"]`), visible(`#node-detail .exchange pre.llm-response`))
	if n := b.eval(`String(document.querySelectorAll("#node-detail .exchange").length)`); n != "2" {
		t.Errorf("the prompt node shows %s LLM exchanges, want 2 (a tool call, then the verdict)", n)
	}
	if req := b.eval(`document.querySelector("#node-detail .exchange pre.llm-request").textContent`); !strings.Contains(req, "check the YAML loader") {
		t.Errorf("the prompt node's first LLM request: %q", req)
	}
	resps := b.eval(`[...document.querySelectorAll("#node-detail .exchange pre.llm-response")].map((e) => e.textContent).join("\n")`)
	if !strings.Contains(resps, "argv") || !strings.Contains(resps, "the YAML loader checks its input") {
		t.Errorf("the prompt node's LLM responses: %q", resps)
	}

	// Usage and cost: what `sylk usage --json` says, per session and model.
	var rep struct {
		BySession map[string]struct {
			TotalTokens int64   `json:"total_tokens"`
			CostUSD     float64 `json:"cost_usd"`
		} `json:"by_session"`
		ByModel map[string]struct {
			TotalTokens int64   `json:"total_tokens"`
			CostUSD     float64 `json:"cost_usd"`
		} `json:"by_model"`
	}
	if err := json.Unmarshal([]byte(sylk(t, bin, data, work, "usage", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	w3, fake := rep.BySession["W3"], rep.ByModel["fake"]
	if w3.TotalTokens < 120+360+160+240 || w3.CostUSD <= 0 {
		t.Fatalf("sylk usage: session W3 %+v, want the Guide's, the Architect's and the Inspector's tokens and a cost", w3)
	}
	b.do("the usage per session and model, as sylk usage reports it",
		click(`nav button[data-tab="usage"]`),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const c = (s) => (document.querySelector(s) || {}).textContent;
			return c('#usage table[data-by="session"] tr[data-key="W3"] td.total') === %q
				&& c('#usage table[data-by="model"] tr[data-key="fake"] td.total') === %q
				&& c('#usage table[data-by="model"] tr[data-key="fake"] td.cost') === %q; })()`,
			fmt.Sprint(w3.TotalTokens), fmt.Sprint(fake.TotalTokens), fmt.Sprintf("$%.4f", fake.CostUSD))))
	if b.eval(`String(window.notReloaded)`) != "yes" {
		t.Error("the page was reloaded")
	}
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(90))
	if err != nil || len(shot) == 0 {
		t.Errorf("screenshot: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "operations.jpg"), shot, 0o644)
}
