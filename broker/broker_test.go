package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testOptions(t *testing.T) Options {
	t.Helper()
	return Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Sync: SyncInterval}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStartProvisionsStreamsAndWritesInfo(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Stream, DLQStream} {
		s, err := b.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if name == Stream {
			cfg := s.CachedInfo().Config
			if !cfg.AllowAtomicPublish || !cfg.AllowDirect || cfg.MaxAge != 0 || cfg.Duplicates != DefaultDuplicateWindow || !cfg.DenyDelete || !cfg.DenyPurge {
				t.Fatalf("SYLK config = %+v", cfg)
			}
		}
	}
	info, err := ReadInfo(opts.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if info.PID != os.Getpid() || !strings.HasPrefix(info.URL, "nats://127.0.0.1:") || info.URL != b.URL() {
		t.Fatalf("server.json = %+v, broker url %s", info, b.URL())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(opts.DataDir, InfoFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("server.json left after a clean stop: %v", err)
	}
}

func TestRestartChangesNothing(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := b.JetStream().Stream(ctx, Stream)
	before := s.CachedInfo()
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S.user.guide.user_input", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, _ = b.JetStream().Stream(ctx, Stream)
	after, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Created.Equal(before.Created) || after.State.Msgs != 1 {
		t.Fatalf("restart recreated or emptied the stream: created %v -> %v, msgs %d", before.Created, after.Created, after.State.Msgs)
	}
	if err := ProvisionStreams(ctx, b.JetStream(), DefaultDuplicateWindow, 0, 0); err != nil {
		t.Fatalf("provisioning twice: %v", err)
	}
	// What the server stores is what provisioning asks for, so provisioning
	// an existing stream (every command, every member's start) sends no
	// update: on a split cluster's minority an update waits for a leader.
	for _, want := range []jetstream.StreamConfig{WithQuota(StreamConfig(DefaultDuplicateWindow), 0), DLQStreamConfig()} {
		s, err := b.JetStream().Stream(ctx, want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if have := s.CachedInfo().Config; !sameStreamConfig(have, want) {
			t.Errorf("stream %s as stored differs from what provisioning wants: max_bytes %d vs %d, discard %v vs %v", want.Name, have.MaxBytes, want.MaxBytes, have.Discard, want.Discard)
		}
	}
}

func TestSecondServerOnSameDataDirFails(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, err = Start(ctx, opts)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second start: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), b.URL()) {
		t.Fatalf("error does not name the running server: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("second start took %s to fail; it must fail at once", time.Since(start))
	}
}

func TestStaleInfoAfterCrashIsDetected(t *testing.T) {
	dir := t.TempDir()
	// What a SIGKILLed server leaves: server.json, and a lock file nobody holds.
	if err := writeInfo(dir, Info{URL: "nats://127.0.0.1:1", PID: 999999}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, LockFile), nil, 0o644)
	_, err := ReadInfo(dir)
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("err = %v, want ErrNoServer saying stale", err)
	}
	ctx := testContext(t)
	b, started, err := Open(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", Sync: SyncInterval})
	if err != nil || !started {
		t.Fatalf("Open over a stale server.json: started=%v err=%v", started, err)
	}
	b.Close()
}

func TestConnectFindsRunningServerWithAuth(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info, _ := ReadInfo(opts.DataDir)
	if info.Creds != b.Auth().CredsPath(AdminUser) {
		t.Fatalf("server.json lacks the admin credentials clients need: %+v", info)
	}
	c, err := Connect(ctx, Options{DataDir: opts.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Embedded() {
		t.Fatal("Connect started a server")
	}
	if _, err := c.JetStream().Stream(ctx, Stream); err != nil {
		t.Fatal(err)
	}
	// Without credentials the server refuses.
	_, err = dial(ctx, Options{Name: "x", ConnectTimeout: time.Second}, info.URL, false)
	if err == nil || !strings.Contains(err.Error(), "Authorization Violation") {
		t.Fatalf("connected without credentials, or not refused for it: %v", err)
	}
}

func TestConnectWithNoServer(t *testing.T) {
	_, err := Connect(testContext(t), Options{DataDir: t.TempDir()})
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("err = %v, want ErrNoServer", err)
	}
}

func TestValidateNamesTheOption(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{DataDir: "d", Sync: "sometimes"}, `--sync "sometimes"`},
		{Options{DataDir: "d", Listen: "localhost"}, `--listen "localhost"`},
		{Options{DataDir: "d", Listen: "localhost:99999"}, `--listen "localhost:99999"`},
		{Options{NATSURL: "nats://x", User: "u"}, "password"},
		{Options{DataDir: "d", Token: "t"}, "--nats-url"},
		{Options{NATSURL: "nats://x", Memory: true}, "Memory"},
	} {
		c.opts.EnsureDefaults()
		err := c.opts.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want it to mention %s", c.opts, err, c.want)
		}
	}
}

func TestListenNone(t *testing.T) {
	ctx := testContext(t)
	opts := Options{DataDir: t.TempDir(), Listen: ListenNone}
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.URL() != "" {
		t.Fatalf("URL = %q for a server that does not listen", b.URL())
	}
	if _, err := os.Stat(filepath.Join(opts.DataDir, InfoFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("server.json written for a server nobody can reach")
	}
}

// A Memory server keeps its streams in memory: a message published is
// there while it runs, and gone when a server starts again on its directory.
func TestMemory(t *testing.T) {
	ctx := testContext(t)
	opts := Options{DataDir: t.TempDir(), Listen: ListenNone, Memory: true, NoAuth: true}
	count := func(b *Broker) uint64 {
		t.Helper()
		s, err := b.JetStream().Stream(ctx, Stream)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Storage != jetstream.MemoryStorage {
			t.Fatalf("stream %s storage %s, want memory", Stream, info.Config.Storage)
		}
		return info.State.Msgs
	}
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.s.user.agent.user_input", []byte("{}")); err != nil {
		b.Close()
		t.Fatal(err)
	}
	if n := count(b); n != 1 {
		b.Close()
		t.Fatalf("%d messages after one publish", n)
	}
	b.Close()
	if b, err = Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := count(b); n != 0 {
		t.Fatalf("%d messages kept by a memory server after it stopped", n)
	}
}

// With --nats-url nothing is started: the broker connects to the external
// server and provisions the streams there, idempotently.
func TestExternalServer(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	ext, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	b, err := Start(ctx, Options{NATSURL: ext.URL(), CredsFile: ext.Auth().CredsPath(AdminUser)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Embedded() || b.URL() != ext.URL() {
		t.Fatalf("embedded=%v url=%s, want a connection to %s", b.Embedded(), b.URL(), ext.URL())
	}
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S.user.guide.user_input", []byte("x")); err != nil {
		t.Fatal(err)
	}
	s, _ := ext.JetStream().Stream(ctx, Stream)
	if info, _ := s.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("the external server's stream holds %d messages", info.State.Msgs)
	}
}

func TestDeferInfo(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	// What a killed server leaves behind must not pass for the new one's.
	if err := writeInfo(opts.DataDir, Info{URL: "nats://127.0.0.1:1", PID: 999999}); err != nil {
		t.Fatal(err)
	}
	opts.DeferInfo = true
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := ReadInfo(opts.DataDir); !errors.Is(err, ErrNoServer) {
		t.Fatalf("server.json before PublishInfo: %v", err)
	}
	if err := b.PublishInfo(); err != nil {
		t.Fatal(err)
	}
	if info, err := ReadInfo(opts.DataDir); err != nil || info.URL != b.URL() {
		t.Fatalf("after PublishInfo: %+v, %v", info, err)
	}
}

// The event log is append-only: the stream itself refuses to delete or purge
// a message, and to turn that off, whatever the credential (here none: the
// permissions of the credentials Sylk issues are TestRolesAllowAndDenyOneByOne's).
func TestStreamIsAppendOnly(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	opts.NoAuth = true
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S.user.guide.user_input", []byte("x")); err != nil {
		t.Fatal(err)
	}
	s, _ := b.JetStream().Stream(ctx, Stream)
	if err := s.DeleteMsg(ctx, 1); err == nil {
		t.Error("deleted a message")
	}
	if err := s.Purge(ctx); err == nil {
		t.Error("purged the stream")
	}
	cfg := StreamConfig(DefaultDuplicateWindow)
	cfg.DenyDelete, cfg.DenyPurge = false, false
	if _, err := b.JetStream().UpdateStream(ctx, cfg); err == nil {
		t.Error("turned deny-delete off")
	}
	if info, _ := s.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages", info.State.Msgs)
	}
}

// A running stream's quota changes in place: set (discard new, so a full
// stream refuses events and drops none), refused below what the stream
// holds, and removed (no limit, discard old as provisioned).
func TestSetQuota(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	opts.NoAuth = true
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	js := b.JetStream()
	for i := range 20 {
		if _, err := js.Publish(ctx, fmt.Sprintf("sylk.v1.S.user.guide.user_input%d", i), make([]byte, 512)); err != nil {
			t.Fatal(err)
		}
	}
	config := func() jetstream.StreamConfig {
		s, err := js.Stream(ctx, Stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config
	}
	if was, err := SetQuota(ctx, js, 1<<20); err != nil || was != 0 {
		t.Fatalf("SetQuota(1 MiB) = %d, %v; want none before", was, err)
	}
	if c := config(); c.MaxBytes != 1<<20 || c.Discard != jetstream.DiscardNew {
		t.Fatalf("after SetQuota(1 MiB): max bytes %d, discard %v", c.MaxBytes, c.Discard)
	}
	if was, err := SetQuota(ctx, js, 4096); !errors.Is(err, ErrQuotaBelowUse) || was != 1<<20 {
		t.Fatalf("SetQuota(4 KiB) on a stream of 10 KiB = %d, %v; want ErrQuotaBelowUse", was, err)
	}
	if c := config(); c.MaxBytes != 1<<20 {
		t.Fatalf("a refused quota changed the stream: max bytes %d", c.MaxBytes)
	}
	if was, err := SetQuota(ctx, js, 0); err != nil || was != 1<<20 {
		t.Fatalf("SetQuota(none) = %d, %v", was, err)
	}
	if c := config(); c.MaxBytes != -1 || c.Discard != jetstream.DiscardOld {
		t.Fatalf("after removing the quota: max bytes %d, discard %v", c.MaxBytes, c.Discard)
	}
}

// A client's configuration is not the stream's: a command connecting with
// another quota (or none, from another directory's config file) leaves the
// server's quota as it is.
func TestConnectLeavesTheStreamsAlone(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	opts.MaxBytes = 4 << 20
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, quota := range []int64{0, 1 << 20} {
		c, err := Connect(ctx, Options{DataDir: opts.DataDir, MaxBytes: quota, Name: "client"})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		s, err := b.JetStream().Stream(ctx, Stream)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := s.CachedInfo().Config; cfg.MaxBytes != 4<<20 || cfg.Discard != jetstream.DiscardNew {
			t.Fatalf("after a client with quota %d: max bytes %d, discard %v; want the server's 4 MiB, discard new", quota, cfg.MaxBytes, cfg.Discard)
		}
	}
}
