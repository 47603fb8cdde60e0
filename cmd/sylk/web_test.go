package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker"
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

	llmSrv := llmtest.New(t)
	llmSrv.Respond(func(req llmtest.Request) llmtest.Reply {
		switch sys := req.System(); {
		case strings.Contains(sys, "You are the Guide"):
			return llmtest.Text(`{"intent_type": "EXPLICIT", "confidence": 0.9, "reason": "bounded", "assumptions_explicit": true, "scope_bounded": true}`)
		case strings.Contains(sys, "You are the Architect"):
			return llmtest.Text(`{"action": "plan", "rationale": "One step.", "plan": {"name": "from the page", "nodes": [{"id": "touch", "agent": "engineer", "tool": "exec", "args": {"argv": ["touch", "approved.txt"]}}]}}`)
		}
		return llmtest.Status(400)
	})
	t.Setenv("SYLK_LLM_BASE_URL", llmSrv.URL())
	t.Setenv("SYLK_LLM_MODEL", "fake")

	srv := startServe(t, bin, data, work, "--http", "127.0.0.1:0")
	defer srv.stop(t)
	info, err := broker.ReadInfo(data)
	if err != nil || info.HTTP == "" {
		t.Fatalf("server.json names no HTTP listener: %+v %v", info, err)
	}

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

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(dir, "chromium")))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v\npage: %s", what, err, html)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	click := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }

	do("open the page with the token", chromedp.Navigate(u.URL), visible(`#live.up`))
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
	if eval(`String(window.notReloaded)`) != "yes" {
		t.Error("the page was reloaded")
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
	if err != nil || len(shot) == 0 {
		t.Errorf("screenshot: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "web.jpg"), shot, 0o644)
	if _, err := os.Stat(filepath.Join(work, "approved.txt")); err != nil {
		t.Errorf("the approved plan did not run: %v", err)
	}
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
