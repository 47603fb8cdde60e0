package projections_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func mustEnv(t testing.TB, session string, typ schemas.Type, p any) *schemas.Envelope {
	t.Helper()
	env, err := schemas.New(typ, session, "user", "", base, p)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func appendAll(t testing.TB, ctx context.Context, log *events.Log, envs ...*schemas.Envelope) uint64 {
	t.Helper()
	var last uint64
	for _, e := range envs {
		seq, err := log.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	return last
}

// sessionsOf appends n sessions, created and resumed.
func sessionsOf(t testing.TB, ctx context.Context, log *events.Log, prefix string, n int) uint64 {
	var last uint64
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		last = appendAll(t, ctx, log, mustEnv(t, id, schemas.TypeSessionCreate, schemas.SessionCreate{Name: id}),
			mustEnv(t, id, schemas.TypeSessionResume, schemas.SessionResume{}))
	}
	return last
}

func TestRunFollowsTheStreamAndWaitForSeesWrites(t *testing.T) {
	w := newWorld(t)
	stopRun := w.follow(w.store.Projector(w.log))

	seq := sessionsOf(t, w.ctx, w.log, "live", 3)
	if err := w.store.WaitFor(w.ctx, seq); err != nil {
		t.Fatal(err)
	}
	s, err := w.store.Session(w.ctx, "live2")
	if err != nil || s.State != projections.StateActive {
		t.Fatalf("after WaitFor(%d): session = %+v, %v; want active", seq, s, err)
	}
	st, err := w.store.Status(w.ctx)
	if err != nil || !st.Ready || st.Applied != seq {
		t.Fatalf("status = %+v, %v; want ready at %d", st, err, seq)
	}
	short, stop := context.WithTimeout(w.ctx, 50*time.Millisecond)
	defer stop()
	if err := w.store.WaitFor(short, seq+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor a sequence not yet appended = %v, want a deadline error", err)
	}
	if err := stopRun(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

func TestRebuildWhileRunning(t *testing.T) {
	w := newWorld(t)
	seq := sessionsOf(t, w.ctx, w.log, "r", 20)
	p := w.store.Projector(w.log)
	w.follow(p)
	if err := w.store.WaitFor(w.ctx, seq); err != nil {
		t.Fatal(err)
	}
	if err := p.Rebuild(w.ctx, nil); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	more := sessionsOf(t, w.ctx, w.log, "after", 2)
	if err := w.store.WaitFor(w.ctx, more); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "rebuild progress cleared", func() bool {
		st, err := w.store.Status(w.ctx)
		return err == nil && st.Rebuild == nil
	})
	ss, err := w.store.Sessions(w.ctx, projections.SessionFilter{State: projections.StateActive})
	if err != nil || len(ss) != 22 {
		t.Fatalf("after the rebuild: %d active sessions, %v; want 22", len(ss), err)
	}
	if rs, _ := w.store.Rejections(w.ctx, projections.RejectionFilter{}); len(rs) != 0 {
		t.Fatalf("rebuild applied events twice: %v", rs[0].Reason)
	}
	if _, err := w.store.Verify(w.ctx, w.log); err != nil {
		t.Fatal(err)
	}
}

func TestRebuildReportsProgress(t *testing.T) {
	w := newWorld(t)
	seq := sessionsOf(t, w.ctx, w.log, "p", 30)
	w.catchUp()
	if err := w.store.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := projections.Open(w.ctx, projections.Options{Dir: "/proj", FS: w.fs, BatchEvents: 7})
	if err != nil {
		t.Fatal(err)
	}
	w.store = s
	var reports []projections.Progress
	if err := s.Projector(w.log).Rebuild(w.ctx, func(p projections.Progress) { reports = append(reports, p) }); err != nil {
		t.Fatal(err)
	}
	if len(reports) < 2 {
		t.Fatalf("%d progress reports for %d events in batches of 7, want several", len(reports), seq)
	}
	last := reports[len(reports)-1]
	if !last.Finished || last.Done != seq || last.Total != seq {
		t.Fatalf("last progress = %+v, want finished with %d of %d", last, seq, seq)
	}
	if s.Cursor() != seq {
		t.Fatalf("cursor = %d after the rebuild, want %d", s.Cursor(), seq)
	}
}

func TestRestartResumesAtTheCursor(t *testing.T) {
	w := newWorld(t)
	sessionsOf(t, w.ctx, w.log, "a", 5)
	w.catchUp()
	w.restart()
	seq := sessionsOf(t, w.ctx, w.log, "b", 5)
	if got := w.catchUp(); got != seq {
		t.Fatalf("cursor after restart = %d, want %d", got, seq)
	}
	// Events applied twice would be refused duplicates.
	if rs, _ := w.store.Rejections(w.ctx, projections.RejectionFilter{}); len(rs) != 0 {
		t.Fatalf("rejections after a restart: %s", rs[0].Reason)
	}
	if ss, _ := w.store.Sessions(w.ctx, projections.SessionFilter{}); len(ss) != 10 {
		t.Fatalf("%d sessions, want 10", len(ss))
	}
}

// A store ahead of its stream (the stream was replaced, or lost an unsynced
// tail) is rebuilt from the stream it now has.
func TestDivergedStreamIsRebuilt(t *testing.T) {
	w := newWorld(t)
	sessionsOf(t, w.ctx, w.log, "old", 5)
	w.catchUp()
	w.store.Close()

	var logs bytes.Buffer
	b2 := brokertest.Start(t, brokertest.Options(t))
	log2 := events.New(b2.JetStream())
	seq := sessionsOf(t, w.ctx, log2, "new", 2)
	s, err := projections.Open(w.ctx, projections.Options{Dir: "/proj", FS: w.fs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.store = s
	if got, err := s.Projector(log2).CatchUp(w.ctx); err != nil || got != seq {
		t.Fatalf("CatchUp = %d, %v; want %d", got, err, seq)
	}
	ss, _ := s.Sessions(w.ctx, projections.SessionFilter{})
	if len(ss) != 2 || ss[0].ID != "new0" {
		t.Fatalf("sessions after the stream changed: %d (first %v), want new0 and new1", len(ss), ss)
	}
	if !strings.Contains(logs.String(), "rebuilding") {
		t.Fatalf("no warning logged: %s", logs.String())
	}
	if _, err := s.Verify(w.ctx, log2); err != nil {
		t.Fatal(err)
	}
}

// A Pebble directory that does not open is moved aside with a warning and
// rebuilt from the stream.
func TestBrokenDirectoryIsMovedAsideAndRebuilt(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	log := events.New(b.JetStream())
	ctx := brokertest.Context(t)
	dir := filepath.Join(t.TempDir(), "projections")
	seq := sessionsOf(t, ctx, log, "s", 4)
	s, err := projections.Open(ctx, projections.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST to corrupt")
	}
	for _, m := range manifests {
		if err := os.WriteFile(m, []byte("garbage, not a manifest\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var logs bytes.Buffer
	s, err = projections.Open(ctx, projections.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open a broken store: %v", err)
	}
	defer s.Close()
	if _, err := os.Stat(dir + ".broken"); err != nil {
		t.Fatalf("broken store not moved aside: %v", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "moved it aside") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	if s.Cursor() != 0 {
		t.Fatalf("fresh store cursor = %d", s.Cursor())
	}
	if got, err := s.Projector(log).CatchUp(ctx); err != nil || got != seq {
		t.Fatalf("CatchUp = %d, %v; want %d", got, err, seq)
	}
	if _, err := s.Verify(ctx, log); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := brokertest.Context(t)
	s, err := projections.Open(ctx, projections.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := projections.Open(ctx, projections.Options{Dir: dir}); !errors.Is(err, projections.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if _, err := os.Stat(dir + ".broken"); err == nil {
		t.Fatal("a store in use was moved aside")
	}
}

// Bytes on the stream that are not an envelope are recorded as rejected and
// the projector goes on.
func TestUndecodableBytesAreRejectedNotFatal(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	log := events.New(b.JetStream())
	w := &world{t: t, ctx: brokertest.Context(t), log: log}
	w.fs = newMemFS()
	w.open()
	defer w.store.Close()
	if _, err := b.JetStream().Publish(w.ctx, "sylk.v1.X.y.z.user_input", []byte("not msgpack"), jetstream.WithMsgID("outsider-1")); err != nil {
		t.Fatal(err)
	}
	seq := sessionsOf(t, w.ctx, log, "ok", 1)
	if got := w.catchUp(); got != seq {
		t.Fatalf("cursor %d, want %d", got, seq)
	}
	rs, err := w.store.Rejections(w.ctx, projections.RejectionFilter{Projection: projections.Log})
	if err != nil || len(rs) != 1 || rs[0].Seq != 1 || rs[0].ID != "outsider-1" || !strings.Contains(rs[0].Reason, "not an envelope: "+schemas.ErrDecode.Error()) {
		t.Fatalf("rejections = %+v, %v", rs, err)
	}
	if _, err := w.store.Session(w.ctx, "ok0"); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    projections.Options
		want string
	}{
		{projections.Options{}, "no directory"},
		{projections.Options{Dir: "d", BatchEvents: -1}, "BatchEvents"},
		{projections.Options{Dir: "d", CacheBytes: -1}, "CacheBytes"},
		{projections.Options{Dir: "d", MemTableBytes: 10}, "MemTableBytes"},
		{projections.Options{Dir: "d", L0CompactionThreshold: -1}, "L0CompactionThreshold"},
		{projections.Options{Dir: "d", GCPercent: -1}, "GCPercent -1 is negative"},
		{projections.Options{Dir: "d", GCPercent: 200, HeapBytes: -1}, "HeapBytes -1 is negative"},
	} {
		o := tc.o
		o.EnsureDefaults()
		if tc.o.BatchEvents < 0 {
			o.BatchEvents = tc.o.BatchEvents
		}
		if tc.o.CacheBytes < 0 {
			o.CacheBytes = tc.o.CacheBytes
		}
		err := o.Validate()
		if !errors.Is(err, projections.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %s", tc.o, err, tc.want)
		}
	}
}

// A rebuild of an empty stream finishes too.
func TestRebuildOfAnEmptyStream(t *testing.T) {
	w := newWorld(t)
	p := w.store.Projector(w.log)
	w.follow(p)
	brokertest.Eventually(t, 10*time.Second, "ready", func() bool {
		st, err := w.store.Status(w.ctx)
		return err == nil && st.Ready
	})
	if err := p.Rebuild(w.ctx, nil); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "rebuild progress cleared", func() bool {
		st, err := w.store.Status(w.ctx)
		return err == nil && st.Rebuild == nil
	})
}

// A store without a write-ahead log (a re-execution's disposable one) folds
// the stream live and after a catch-up (both commit as synced writes of a
// durable store do), and writes no log file.
func TestNoWALStoreFoldsAndWritesNoLog(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	ctx, log, dir := brokertest.Context(t), events.New(b.JetStream()), t.TempDir()
	sessionsOf(t, ctx, log, "before", 3)
	s, err := projections.Open(ctx, projections.Options{Dir: dir, NoWAL: true, MemTableBytes: 4 << 20, BatchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Projector(log).Run(rctx) }()
	stopRun := sync.OnceValue(func() error { cancel(); return <-done })
	defer stopRun() // before s.Close, however the test ends
	seq := sessionsOf(t, ctx, log, "live", 3)
	if err := s.WaitFor(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if err := stopRun(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if ss, err := s.Sessions(ctx, projections.SessionFilter{}); err != nil || len(ss) != 6 {
		t.Fatalf("sessions = %d, %v; want 6", len(ss), err)
	}
	// Pebble opens a log file all the same, but writes (or allocates)
	// nothing in it.
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		var st syscall.Stat_t
		if err := syscall.Stat(l, &st); err != nil || st.Size != 0 || st.Blocks != 0 {
			t.Fatalf("log file %s: %d bytes, %d blocks, %v; want nothing", l, st.Size, st.Blocks, err)
		}
	}
}

// A projector that starts while its server is away (restarting, or a
// cluster without a quorum) waits for it: it warns that the stream cannot be
// read, keeps trying, and once the server is back (same store, same address)
// folds what the stream holds and follows it. It never returns meanwhile.
func TestRunWaitsForAServerThatRestarts(t *testing.T) {
	ctx := brokertest.Context(t)
	opts := brokertest.Options(t)
	opts.Listen, opts.NoAuth = brokertest.FreeAddrs(t, 1)[0], true
	srv, err := broker.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Close() }()
	client, err := broker.Connect(ctx, broker.Options{NATSURL: srv.URL(), Name: "projector-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	log := events.New(client.JetStream())
	sessionsOf(t, ctx, log, "before", 2)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	warned := &streamWarnings{}
	store, err := projections.Open(ctx, projections.Options{Dir: t.TempDir(), Logger: slog.New(warned)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// Without a deadline, as the server runs it: each read is bounded by
	// the client's own timeout.
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- store.Projector(log).Run(rctx) }()
	defer func() { cancel(); <-done }()
	brokertest.Eventually(t, 30*time.Second, "two warnings that the stream cannot be read", func() bool { return warned.n.Load() >= 2 })
	select {
	case err := <-done:
		t.Fatalf("the projector returned while the server was down: %v", err)
	default:
	}

	if srv, err = broker.Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	seq := sessionsOf(t, ctx, log, "after", 2)
	if err := store.WaitFor(ctx, seq); err != nil {
		t.Fatalf("wait for seq %d after the restart: %v", seq, err)
	}
	for _, id := range []string{"before1", "after1"} {
		if s, err := store.Session(ctx, id); err != nil || s.Name != id {
			t.Fatalf("session %s = %+v, %v", id, s, err)
		}
	}
}

// streamWarnings counts the projector's warnings that the stream cannot be
// read.
type streamWarnings struct{ n atomic.Int64 }

func (w *streamWarnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *streamWarnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "the stream cannot be read") {
		w.n.Add(1)
	}
	return nil
}
func (w *streamWarnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *streamWarnings) WithGroup(string) slog.Handler      { return w }
