package broker

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// roleConn connects to b's server with a fresh credential of role r, and
// collects the permission violations the server reports on it.
type roleConn struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	violations chan error
}

func connectAs(t *testing.T, b *Broker, name, role string) *roleConn {
	t.Helper()
	r, err := ParseRole(role)
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.Auth().AddUser(name, r)
	if err != nil {
		t.Fatal(err)
	}
	rc := &roleConn{violations: make(chan error, 16)}
	rc.nc, err = nats.Connect(b.URL(), nats.UserCredentials(u.Creds), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			rc.violations <- err
		}
	}))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(rc.nc.Close)
	rc.js, _ = jetstream.New(rc.nc)
	return rc
}

// allowed runs op and fails if the server refused it for permissions.
func (rc *roleConn) allowed(t *testing.T, what string, op func(context.Context) error) {
	t.Helper()
	if err := rc.run(op); err != nil {
		t.Errorf("%s: refused: %v", what, err)
	}
}

// denied runs op and fails unless the server refused it for permissions.
func (rc *roleConn) denied(t *testing.T, what string, op func(context.Context) error) {
	t.Helper()
	err := rc.run(op)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "permission") {
		t.Errorf("%s: want a permissions violation, got %v", what, err)
	}
}

func (rc *roleConn) run(op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(rc.violations) > 0 {
		<-rc.violations
	}
	before := rc.nc.LastError()
	done := make(chan error, 1)
	go func() {
		err := op(ctx)
		if ferr := rc.nc.FlushWithContext(ctx); err == nil && ferr != nil && ctx.Err() == nil {
			err = ferr
		}
		done <- err
	}()
	var err error
	select {
	case v := <-rc.violations:
		// A refused request gets no answer: stop waiting for one.
		cancel()
		<-done
		return v
	case err = <-done:
	}
	// The error handler runs asynchronously; the connection's last error is
	// set before the flush's answer is read.
	if last := rc.nc.LastError(); last != before && errors.Is(last, nats.ErrPermissionViolation) {
		return last
	}
	if errors.Is(err, nats.ErrNoResponders) {
		// A request nobody serves here (sylk.api without its service) passed
		// the permission check.
		return nil
	}
	return err
}

func publish(rc *roleConn, subject string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rc.js.Publish(ctx, subject, []byte("x"))
		return err
	}
}

func subscribe(rc *roleConn, subject string) func(context.Context) error {
	return func(context.Context) error {
		sub, err := rc.nc.SubscribeSync(subject)
		if err != nil {
			return err
		}
		// A refused subscription is reported asynchronously, before the
		// answer to the flush that run sends after this.
		return sub.Unsubscribe()
	}
}

func readStream(rc *roleConn) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := rc.js.OrderedConsumer(ctx, Stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		_, err = c.Next(jetstream.FetchMaxWait(time.Second))
		return err
	}
}

func createConsumer(rc *roleConn, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rc.js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy})
		return err
	}
}

func fetch(rc *roleConn, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := rc.js.Consumer(ctx, Stream, name)
		if err != nil {
			return err
		}
		b, err := c.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return err
		}
		// The batch fills in a goroutine of its own until the wait ends:
		// drain it, or it outlives the test (goleak).
		for range b.Messages() {
		}
		return nil
	}
}

func deleteStream(rc *roleConn) func(context.Context) error {
	return func(ctx context.Context) error { return rc.js.DeleteStream(ctx, Stream) }
}

func purge(rc *roleConn) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rc.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+Stream, nil)
		return err
	}
}

func deleteMsg(rc *roleConn) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rc.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.DELETE."+Stream, []byte(`{"seq":1}`))
		return err
	}
}

func request(rc *roleConn, subject string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rc.nc.RequestWithContext(ctx, subject, []byte("{}"))
		return err
	}
}

func TestRolesAllowAndDenyOneByOne(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.JetStream().Publish(ctx, "sylk.v1.S1.user.guide.user_input", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// The agents' consumers exist, as under sylk serve.
	for _, k := range []string{"engineer", "tester"} {
		if _, err := b.JetStream().CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{Durable: "agent-" + k, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("observer", func(t *testing.T) {
		o := connectAs(t, b, "obs", "observer")
		o.allowed(t, "subscribe sylk.v1.>", subscribe(o, "sylk.v1.>"))
		o.allowed(t, "read the stream", readStream(o))
		o.allowed(t, "create its durable consumer", createConsumer(o, "obs-audit"))
		o.allowed(t, "read its durable consumer", fetch(o, "obs-audit"))
		o.allowed(t, "a read-only query", request(o, "sylk.api.session.list"))
		o.denied(t, "publish an event", publish(o, "sylk.v1.S1.user.guide.user_input"))
		o.denied(t, "publish as an agent", publish(o, "sylk.v1.S1.engineer.user.task_complete"))
		o.denied(t, "read an agent's consumer", fetch(o, "agent-engineer"))
		o.denied(t, "take over an agent's consumer", createConsumer(o, "agent-engineer"))
		o.denied(t, "subscribe to the API", subscribe(o, "sylk.api.>"))
		o.denied(t, "rebuild the projections", request(o, "sylk.api.projections.rebuild"))
		o.denied(t, "delete the stream", deleteStream(o))
		o.denied(t, "purge the stream", purge(o))
		o.denied(t, "publish a dead letter", publish(o, "sylk.dlq.agent-engineer"))
	})

	t.Run("agent", func(t *testing.T) {
		e := connectAs(t, b, "eng", "agent:engineer")
		e.allowed(t, "publish as itself", publish(e, "sylk.v1.S1.engineer.orchestrator.task_complete"))
		e.allowed(t, "read its consumer", fetch(e, "agent-engineer"))
		e.allowed(t, "update its consumer", createConsumer(e, "agent-engineer"))
		e.allowed(t, "dead-letter", publish(e, "sylk.dlq.agent-engineer"))
		e.allowed(t, "read the stream", readStream(e))
		e.denied(t, "publish as another agent", publish(e, "sylk.v1.S1.tester.orchestrator.task_complete"))
		e.denied(t, "publish as the user", publish(e, "sylk.v1.S1.user.guide.user_input"))
		e.denied(t, "read another agent's consumer", fetch(e, "agent-tester"))
		e.denied(t, "dead-letter for another agent", publish(e, "sylk.dlq.agent-tester"))
		e.denied(t, "delete the stream", deleteStream(e))
		e.denied(t, "purge the stream", purge(e))
		e.denied(t, "delete a message", deleteMsg(e))

		g := connectAs(t, b, "guide", "agent:guide")
		g.allowed(t, "the Guide routes a user's message", publish(g, "sylk.v1.S1.user.engineer.user_input"))
	})

	t.Run("consumer", func(t *testing.T) {
		if _, err := b.JetStream().CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{Durable: "export", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		c := connectAs(t, b, "export-reader", "consumer:export")
		c.allowed(t, "read its consumer", fetch(c, "export"))
		c.denied(t, "read another consumer", fetch(c, "agent-engineer"))
		c.denied(t, "create a consumer", createConsumer(c, "other"))
		c.denied(t, "publish", publish(c, "sylk.v1.S1.user.guide.user_input"))
		c.denied(t, "subscribe to the events", subscribe(c, "sylk.v1.>"))
	})

	t.Run("admin", func(t *testing.T) {
		a := connectAs(t, b, "root", "admin")
		a.allowed(t, "publish anything", publish(a, "sylk.v1.S1.user.guide.user_input"))
		a.allowed(t, "administer consumers", createConsumer(a, "agent-engineer"))
		a.denied(t, "delete the stream", deleteStream(a))
		a.denied(t, "purge the stream", purge(a))
	})

	s, err := b.JetStream().Stream(ctx, Stream)
	if err != nil {
		t.Fatalf("the stream is gone: %v", err)
	}
	if info, _ := s.Info(ctx); info == nil || info.State.FirstSeq != 1 {
		t.Fatalf("the stream lost its first message: %+v", info)
	}
}

func TestNoCredentialsWrongCredentialsAndRevokedAreRefused(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := nats.Connect(b.URL()); err == nil || !strings.Contains(err.Error(), "Authorization Violation") {
		t.Fatalf("anonymous connection: %v", err)
	}
	// Credentials of another data directory's operator.
	other, err := LoadAuth(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nats.Connect(b.URL(), nats.UserCredentials(other.CredsPath(AdminUser))); err == nil {
		t.Fatal("connected with another server's credentials")
	}

	u, err := b.Auth().AddUser("temp", Role{Kind: RoleObserver})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(b.URL(), nats.UserCredentials(u.Creds), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := b.Revoke(ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the revoked user's connection stays open")
	}
	if _, err := nats.Connect(b.URL(), nats.UserCredentials(u.Creds)); err == nil {
		t.Fatal("a revoked user connected")
	}
	if got, _ := b.Auth().User("temp"); !got.Revoked {
		t.Fatalf("user ls does not show the revocation: %+v", got)
	}
	// The revocation survives a restart.
	b.Close()
	b, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := nats.Connect(b.URL(), nats.UserCredentials(u.Creds)); err == nil {
		t.Fatal("a revoked user connected after a restart")
	}
	if _, err := b.Auth().Revoke(AdminUser); !errors.Is(err, ErrInvalidRole) {
		t.Fatalf("revoking admin: %v", err)
	}
}

func TestCredentialFilesAreOwnerOnly(t *testing.T) {
	ctx, opts := testContext(t), testOptions(t)
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Auth().AddUser("o", Role{Kind: RoleObserver}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = walkFiles(opts.DataDir+"/"+AuthDir, func(path string, mode os.FileMode) {
		n++
		if mode.Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", path, mode.Perm())
		}
	})
	if err != nil || n < 9 {
		t.Fatalf("walked %d files: %v", n, err)
	}
	if st, err := os.Stat(opts.DataDir + "/" + InfoFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("server.json: %v %v", st.Mode(), err)
	}
}

func TestMalformedCredsAreNamed(t *testing.T) {
	path := t.TempDir() + "/bad.creds"
	os.WriteFile(path, []byte("-----BEGIN NATS USER JWT-----\nnot a jwt\n------END NATS USER JWT------\n"), 0o600)
	if _, err := ReadCreds(path); !errors.Is(err, ErrBadCreds) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(path, []byte("hello"), 0o600)
	if _, err := ReadCreds(path); !errors.Is(err, ErrBadCreds) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRole(t *testing.T) {
	for in, want := range map[string]string{"admin": "admin", "observer": "observer", "agent:engineer": "agent:engineer", "consumer:export": "consumer:export"} {
		if r, err := ParseRole(in); err != nil || r.String() != want {
			t.Errorf("ParseRole(%q) = %v, %v", in, r, err)
		}
	}
	for _, in := range []string{"", "root", "agent:", "agent:hacker", "consumer:agent-engineer", "consumer:a.b", "observer:x"} {
		if _, err := ParseRole(in); !errors.Is(err, ErrInvalidRole) {
			t.Errorf("ParseRole(%q): err = %v", in, err)
		}
	}
}

func walkFiles(root string, fn func(string, os.FileMode)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fn(path, info.Mode())
		return nil
	})
}
