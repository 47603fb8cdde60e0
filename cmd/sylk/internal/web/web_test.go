package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallBuffers gives each accepted connection a small send buffer, so a
// client that does not read fills it after a few events.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// startWeb serves a web view on a fresh broker, fed by the projector of a
// projections store as in `sylk serve`; before, if set, appends what the
// stream holds when the view starts.
func startWeb(t *testing.T, buffer int, before func(*events.Log)) (*Web, *events.Log, *httptest.Server) {
	t.Helper()
	st := llmtest.NewStack(t)
	b, log := st.Broker, st.Log
	if before != nil {
		before(log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Start(ctx, Options{Conn: b.Conn(), Log: log, Store: st.Store, JS: b.JetStream(), Secret: []byte("the admin's creds"), Now: time.Now, Buffer: buffer})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	w.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		w.Close()
	})
	return w, log, srv
}

func do(t *testing.T, method, url, token string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAuth: the page and its API take the token derived from the
// credential, as a bearer or as the cookie the token's address sets; a
// change through the cookie needs RequestHeader too.
func TestAuth(t *testing.T) {
	w, _, srv := startWeb(t, 0, nil)
	if w.Token() != Token([]byte("the admin's creds")) || w.Token() == Token([]byte("another")) {
		t.Fatal("the token is not a function of the secret")
	}
	for _, path := range []string{"/", "/static/app.js", "/api/events"} {
		if code, _ := do(t, "GET", srv.URL+path, "", nil, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d", path, code)
		}
		if code, _ := do(t, "GET", srv.URL+path, "wrong", nil, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d", path, code)
		}
	}
	if code, body := do(t, "GET", srv.URL+"/", w.Token(), nil, ""); code != http.StatusOK || !strings.Contains(body, "<title>Sylk</title>") {
		t.Errorf("GET / with the token: %d %.100s", code, body)
	}

	// The token's address sets the cookie and sends the browser on without it.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.Get(srv.URL + "/?token=" + w.Token())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Fatalf("opening the token's address: %s at %s", resp.Status, resp.Request.URL)
	}
	post := func(header bool) int {
		req, _ := http.NewRequest("POST", srv.URL+"/api/q/session.list", strings.NewReader("{}"))
		if header {
			req.Header.Set(RequestHeader, "1")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(false); code != http.StatusForbidden {
		t.Errorf("a POST with the cookie only: %d, want 403", code)
	}
	// The header passes the check; no query API answers here (503).
	if code := post(true); code != http.StatusServiceUnavailable {
		t.Errorf("a POST with the cookie and the header: %d, want 503 (no API in this test)", code)
	}
	if code, body := do(t, "POST", srv.URL+"/api/q/projections.rebuild", w.Token(), nil, "{}"); code != http.StatusNotFound {
		t.Errorf("a query that changes something: %d %s", code, body)
	}
}

// sseReader reads a live view's events in the background: the sequence of
// each, or 0 for an event whose data is not the line of its id.
type sseReader struct {
	mu   sync.Mutex
	seqs []uint64
	body io.ReadCloser
	done chan struct{}
}

func openEvents(t *testing.T, url, token string) *sseReader {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	r := &sseReader{body: resp.Body, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		id := ""
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				id = v
				continue
			}
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			// The line of the id's event (read fast: the server's send
			// buffers are small, and a slow reader holds up its view).
			seq, _ := strconv.ParseUint(id, 10, 64)
			if !strings.HasPrefix(data, `{"seq":`+id+`,`) || !strings.HasSuffix(data, "}") {
				seq = 0
			}
			r.mu.Lock()
			r.seqs = append(r.seqs, seq)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { resp.Body.Close(); <-r.done })
	return r
}

func (r *sseReader) got() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.seqs...)
}

func appendInputs(t *testing.T, log *events.Log, session string, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	text := strings.Repeat("x", 1000)
	for range n {
		env, err := schemas.New(schemas.TypeUserInput, session, "user", "", time.Now(), schemas.UserInput{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := log.Append(brokertest.Context(t), env)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestLiveViews: each view gets the events of its filter, in order, the
// past (since) then the live ones, none twice, each with its line; a view
// that never reads is dropped once its queue is full, and the others go on
// getting every event.
func TestLiveViews(t *testing.T) {
	// A buffer of 512: the silent view's queue fills with the 1,200 events
	// below (its socket's buffers take a hundred or more), while a burst of
	// the projector catching up fits (with 64, a lag of 64 events under
	// -race on a loaded machine dropped reading views too).
	w, log, srv := startWeb(t, 512, nil)
	before := appendInputs(t, log, "S1", 3)

	fast := openEvents(t, srv.URL+"/api/events?session=S1&since=all", w.Token())
	other := openEvents(t, srv.URL+"/api/events?session=S2", w.Token())
	// Every event, as the records' blocks hold them (some 1.2 KB each,
	// so the 1,200 below span many blocks).
	every := openEvents(t, srv.URL+"/api/events", w.Token())
	// A browser that never reads: a raw connection with a small receive
	// buffer, the request sent, nothing read.
	silent, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(silent, "GET /api/events?session=S1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", w.Token())
	brokertest.Eventually(t, 10*time.Second, "four live views", func() bool { return w.Watching() == 4 })

	live := appendInputs(t, log, "S1", 1200)
	s2 := appendInputs(t, log, "S2", 2)
	want := append(before, live...)
	if !brokertest.Poll(30*time.Second, func() bool { return len(fast.got()) >= len(want) }) {
		t.Fatalf("the reading view got %d of %d events; %d views dropped", len(fast.got()), len(want), w.Drops())
	}
	if got := fast.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the S1 view got %v, want %v", got, want)
	}
	brokertest.Eventually(t, 10*time.Second, "the S2 view gets its events", func() bool { return len(other.got()) >= len(s2) })
	if got := other.got(); fmt.Sprint(got) != fmt.Sprint(s2) {
		t.Errorf("the S2 view got %v, want %v", got, s2)
	}
	everyWant := append(live, s2...)
	brokertest.Eventually(t, 10*time.Second, "the unfiltered view gets every event", func() bool {
		got := every.got()
		return len(got) > 0 && got[len(got)-1] >= everyWant[len(everyWant)-1]
	})
	// The stack's agents may append events of their own: every event
	// appended here is among the view's, which are in order, each once.
	got, i := every.got(), 0
	for k, seq := range got {
		if seq == 0 || k > 0 && seq <= got[k-1] {
			t.Fatalf("the unfiltered view got %v: want increasing sequences, each with its line", got)
		}
		if i < len(everyWant) && seq == everyWant[i] {
			i++
		}
	}
	if i != len(everyWant) {
		t.Errorf("the unfiltered view got %v, missing %v", got, everyWant[i:])
	}
	if w.Drops() != 1 {
		t.Errorf("%d views dropped, want the silent one", w.Drops())
	}

	// Resuming after the last event seen (a reconnect's Last-Event-ID).
	req, _ := http.NewRequest("GET", srv.URL+"/api/events?session=S1", nil)
	req.Header.Set("Authorization", "Bearer "+w.Token())
	req.Header.Set("Last-Event-ID", strconv.FormatUint(live[len(live)-2], 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if id != strconv.FormatUint(live[len(live)-1], 10) {
				t.Errorf("resumed at %s, want %d", id, live[len(live)-1])
			}
			break
		}
	}
}

// TestFrameIsTheBriefLine: the server-sent event the hub encodes once, from
// the undecoded event, carries exactly the event's brief line (what the
// page shows of it), for events of several types, with text JSON must
// escape, and for bytes that are no envelope (their subject and why); and
// the same events' `sylk tail --json` lines are the whole events.
func TestFrameIsTheBriefLine(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	log := events.New(b.JetStream())
	ctx := brokertest.Context(t)
	now := time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.UTC)
	var envs []*schemas.Envelope
	add := func(env *schemas.Envelope, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, env)
	}
	add(schemas.New(schemas.TypeUserInput, "S1", "user", "", now, schemas.UserInput{Text: `<b>"quoted" & \ tab	newline
 é \u2028`}))
	add(schemas.New(schemas.TypeLLMUsage, "S1", "engineer", "", now, schemas.LLMUsage{CallID: "c1", Agent: "engineer", Model: "m", Usage: schemas.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, CostUSD: 0.25}))
	withMeta, err := schemas.New(schemas.TypeUserInput, "S2", "user", "guide", now, schemas.UserInput{Text: "x"})
	withMeta.Metadata = map[string]string{"k": "v<"}
	withMeta.CorrelationID = "corr-1"
	add(withMeta, err)
	for _, env := range envs {
		if _, err := log.Append(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S3.user.guide.user_input", []byte("not an envelope")); err != nil {
		t.Fatal(err)
	}

	decoded, err := log.Read(ctx, events.Prefix+".>", events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := log.Read(ctx, events.Prefix+".>", events.Cursor{}, 0, events.Raw())
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 4 || len(decoded) != 4 {
		t.Fatalf("read %d and %d events, want 4", len(raw), len(decoded))
	}
	var rs records
	var prev *frame
	for i, ev := range raw {
		want, err := json.Marshal(briefLine(t, decoded[i]))
		if err != nil {
			t.Fatal(err)
		}
		// Beside it, `sylk tail --json`'s line of the same code is the
		// whole event.
		wantLine, err := json.Marshal(tailLine(decoded[i]))
		if err != nil {
			t.Fatal(err)
		}
		sp, err := rs.add(ev, decodeEvent(ev))
		if err != nil {
			t.Fatal(err)
		}
		f := &sp[0]
		if line, err := ev.AppendLine(nil, nil); err != nil || string(line) != string(wantLine) {
			t.Errorf("event %d's tail line:\n got %s (%v)\nwant %s", ev.Seq, line, err, wantLine)
		}
		if prev != nil && !follows(prev.record, f.record) {
			t.Errorf("event %d's record does not follow the one before in its block", ev.Seq)
		}
		prev = f
		wantRecord := fmt.Sprintf("id: %d\ndata: %s\n\n", ev.Seq, want)
		if string(f.record) != wantRecord {
			t.Errorf("event %d:\n got %q\nwant %q", ev.Seq, f.record, wantRecord)
		}
		if toks := subjectTokens(f.subject); toks != [4]string(strings.Split(ev.Subject, ".")[2:]) {
			t.Errorf("event %d: tokens %v of %s", ev.Seq, toks, ev.Subject)
		}
	}
	if !strings.Contains(string(mustFrame(t, raw[3]).record), `"invalid":`) {
		t.Errorf("the bytes that are no envelope are not marked invalid: %s", mustFrame(t, raw[3]).record)
	}
}

func mustFrame(t *testing.T, ev *events.Event) *frame {
	t.Helper()
	var rs records
	sp, err := rs.add(ev, decodeEvent(ev))
	if err != nil {
		t.Fatal(err)
	}
	return &sp[0]
}

// routedEvent is an event of the routed path ('sylk bench route') as the
// projector hands it to the web view: decoded, with its payload.
func routedEvent(tb testing.TB) (*events.Event, any) {
	env, err := schemas.New(schemas.TypeContextRequest, "S1", "user", "", time.Now(), schemas.ContextRequest{Query: "where is the config loader?"})
	if err != nil {
		tb.Fatal(err)
	}
	data, err := schemas.Marshal(env)
	if err != nil {
		tb.Fatal(err)
	}
	ev := &events.Event{Seq: 12345, Subject: events.Subject(env), Data: data}
	return ev, decodeEvent(ev)
}

// BenchmarkRecordsAdd is the hub's work per event a page watches: encode
// the server-sent event all pages share from the event the projector
// decoded, into the block they share.
func BenchmarkRecordsAdd(b *testing.B) {
	ev, payload := routedEvent(b)
	var rs records
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rs.add(ev, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBlocksReusedOnceSent: the hub writes a block of records again once
// every view sent them, never while a view still holds one, so the live
// stream makes no garbage per event.
func TestBlocksReusedOnceSent(t *testing.T) {
	h := newHub(4096)
	a, b := h.watch(events.Filter{}), h.watch(events.Filter{})
	filtered := h.watch(events.Filter{Session: "S1"}) // gets copies
	ev, payload := routedEvent(t)
	feed := func(n int) {
		for range n {
			ev.Seq++
			h.feed(ev, payload)
		}
	}
	blocksOf := func(spans []span) map[*block]bool {
		m := map[*block]bool{}
		for _, s := range spans {
			m[s[0].blk] = true
		}
		return m
	}

	feed(1000)
	held := h.take(b, nil) // b sends them later
	var heldRecords []string
	for _, s := range held {
		for _, f := range s {
			heldRecords = append(heldRecords, string(f.record))
		}
	}
	if len(heldRecords) != 1000 {
		t.Fatalf("a view of every event was handed %d of 1,000 events", len(heldRecords))
	}
	first := blocksOf(held)
	// The events of a block come as one span of it: a view's work grows
	// with the blocks, not the events.
	if len(held) != len(first) {
		t.Errorf("1,000 events in %d blocks came as %d spans", len(first), len(held))
	}
	// The block being filled gets the next records after b's: it is
	// not written again, it goes on.
	delete(first, h.records.cur)
	if len(first) < 3 {
		t.Fatalf("1,000 records in %d blocks: the test wants several", len(first))
	}
	sentA := h.take(a, nil)
	sentF := h.take(filtered, nil)
	for range 3 { // a and filtered send theirs; b holds on
		feed(1000)
		sentA = h.take(a, sentA)
		sentF = h.take(filtered, sentF)
		for blk := range blocksOf(sentA) {
			if first[blk] {
				t.Fatal("a block a view has not sent was written again")
			}
		}
	}
	i := 0
	for _, s := range held {
		for _, f := range s {
			if string(f.record) != heldRecords[i] {
				t.Fatalf("record %d changed while its view held it:\n got %q\nwant %q", i, f.record, heldRecords[i])
			}
			i++
		}
	}

	// b sends its frames and takes the rest: the first blocks are free.
	sentB := h.take(b, held)
	sentA = h.take(a, sentA)
	sentF = h.take(filtered, sentF)
	feed(1000)
	sentA = h.take(a, sentA)
	reused := 0
	for blk := range blocksOf(sentA) {
		if first[blk] {
			reused++
		}
	}
	if reused == 0 {
		t.Error("the blocks every view sent were not written again")
	}

	// In the steady state, the views of every event sending what they
	// took, an event costs no allocation (a filtered view's copies do).
	h.unwatch(filtered, sentF)
	round := func() {
		feed(200)
		sentA, sentB = h.take(a, sentA), h.take(b, sentB)
	}
	for range 5 { // the blocks in flight, and the views' queues, grow
		round()
	}
	if allocs := testing.AllocsPerRun(20, round); allocs > 0 {
		t.Errorf("%.1f allocations per 200 events with two views: want none", allocs)
	}
}

// briefLine is the shape of the line a page gets of an event, for
// json.Marshal to give the reference bytes AppendBrief must write: the
// envelope's brief (schemas.Envelope.AppendBriefJSON, checked against
// encoding/json in its package), or the subject and why the bytes are no
// envelope.
func briefLine(t *testing.T, ev *events.Event) any {
	l := struct {
		Seq      uint64          `json:"seq"`
		Subject  string          `json:"subject,omitempty"`
		Envelope json.RawMessage `json:"envelope,omitempty"`
		Invalid  string          `json:"invalid,omitempty"`
	}{Seq: ev.Seq}
	if ev.Env == nil {
		l.Subject, l.Invalid = ev.Subject, ev.Err.Error()
		return l
	}
	brief, err := ev.Env.AppendBriefJSON(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Envelope = brief
	return l
}

// tailLine is the shape of a `sylk tail --json` line, for json.Marshal to
// give the reference bytes AppendLine must write.
func tailLine(ev *events.Event) any {
	l := struct {
		Seq      uint64            `json:"seq"`
		Subject  string            `json:"subject"`
		Envelope *schemas.Envelope `json:"envelope,omitempty"`
		Invalid  string            `json:"invalid,omitempty"`
	}{Seq: ev.Seq, Subject: ev.Subject, Envelope: ev.Env}
	if ev.Err != nil {
		l.Invalid = ev.Err.Error()
	}
	return l
}

// countingWriter records which writes came straight from a block.
type countingWriter struct {
	*httptest.ResponseRecorder
	starts      map[*byte]bool // where the blocks' records start
	direct, all int            // bytes written from a block, bytes written
	writes      int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	c.all += len(p)
	if len(p) > 0 && c.starts[&p[0]] {
		c.direct += len(p)
	}
	return c.ResponseRecorder.Write(p)
}

// TestSSEWritesEveryRecordOnce: what a view sends reaches the response in
// order, each record once, whether records follow one another in a block
// (written from the block, not copied), come as copies (a filtered view's)
// or were sent already (the past and the live stream overlap).
func TestSSEWritesEveryRecordOnce(t *testing.T) {
	var rs records
	var frames []span
	var want strings.Builder
	starts := map[*byte]bool{}
	for seq := uint64(1); seq <= 3000; seq++ {
		f, err := rs.add(&events.Event{Seq: seq, Subject: "sylk.v1.S1.user.guide.user_input"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(f[0].record)
		starts[&f[0].record[0]] = true
		if seq%700 < 3 {
			f = f[0].own()
		}
		frames = append(frames, f)
	}
	if len(rs.cur.data) == want.Len() {
		t.Fatalf("%d bytes of records in one block: the test wants several", want.Len())
	}
	rec := &countingWriter{ResponseRecorder: httptest.NewRecorder(), starts: starts}
	out := &sse{rw: rec, rc: http.NewResponseController(rec)}
	send := func(spans ...span) {
		t.Helper()
		for _, s := range spans {
			if err := out.send(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Sent in spans of up to 7 frames, as a view takes them.
	var spans []span
	for i, f := range frames {
		spans, _ = extend(spans, f)
		if i%7 < 6 && i != 1500 {
			continue
		}
		send(spans...)
		spans = spans[:0]
		switch i {
		case 1500: // sent already: skipped, whole or in part
			send(frames[1490:1501]...)
			part, _ := extend(nil, frames[1495])
			for _, f := range frames[1496:1510] {
				part, _ = extend(part, f)
			}
			if len(part) != 1 {
				t.Fatalf("frames 1495 to 1509 make %d spans, want 1", len(part))
			}
			send(part...)
		case 1001, 2001:
			if err := out.flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(spans...)
	if err := out.flush(); err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != want.String() {
		n := 0
		for n < min(len(got), want.Len()) && got[n] == want.String()[n] {
			n++
		}
		t.Fatalf("the response differs from the records at byte %d of %d (got %d bytes)", n, want.Len(), len(got))
	}
	if rec.direct < rec.all*3/4 {
		t.Errorf("%d of %d bytes written from the blocks, in %d writes: want most", rec.direct, rec.all, rec.writes)
	}
	t.Logf("%d bytes in %d writes, %d from the blocks", rec.all, rec.writes, rec.direct)
}

// BenchmarkLiveViews is the CPU the live stream costs per event with 0 and
// 10 views reading it over loopback HTTP (their reading counted too, in
// this process: 'sylk bench web' measures the server apart), the events
// fed as the projector hands them at the rate of 'sylk bench route', some 21 a
// millisecond.
func BenchmarkLiveViews(b *testing.B) {
	ev, payload := routedEvent(b)
	var rs records
	line := func(seq uint64) int { // the record of the event of seq
		ev.Seq = seq
		f, err := rs.add(ev, payload)
		if err != nil {
			b.Fatal(err)
		}
		return len(f[0].record)
	}
	for _, views := range []int{0, 10} {
		b.Run(fmt.Sprintf("views=%d", views), func(b *testing.B) {
			w := &Web{token: Token([]byte("bench")), hub: newHub(ClientBuffer), opts: Options{Now: time.Now}}
			mux := http.NewServeMux()
			w.Register(mux)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			var got atomic.Int64 // bytes the views read
			var readers sync.WaitGroup
			defer readers.Wait()
			for range views {
				req, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
				req.Header.Set("Authorization", "Bearer "+w.Token())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				readers.Go(func() {
					buf := make([]byte, 256<<10)
					for {
						n, err := resp.Body.Read(buf)
						got.Add(int64(n))
						if err != nil {
							return
						}
					}
				})
			}
			// Each view's ": live" comment, then every record.
			want := int64(views) * int64(len(": live\n\n"))
			if !brokertest.Poll(10*time.Second, func() bool { return w.Watching() == views && got.Load() == want }) {
				b.Fatalf("%d of %d views open", w.Watching(), views)
			}
			for seq := uint64(1); seq <= uint64(b.N); seq *= 10 {
				want += int64(views) * int64(line(seq)) * int64(min(uint64(b.N)+1, seq*10)-seq)
			}
			const perTick = 21
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			cpu0 := eventbench.ProcessCPU()
			for seq := uint64(1); seq <= uint64(b.N); {
				<-tick.C
				for k := perTick - 1; k >= 0 && seq <= uint64(b.N); k-- {
					ev.Seq, ev.Pending = seq, min(uint64(k), uint64(b.N)-seq)
					w.hub.feed(ev, payload)
					seq++
				}
			}
			if !brokertest.Poll(30*time.Second, func() bool { return got.Load() >= want }) {
				b.Fatalf("the views read %d of %d bytes", got.Load(), want)
			}
			b.ReportMetric(float64(eventbench.ProcessCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/event")
			srv.CloseClientConnections()
		})
	}
}
