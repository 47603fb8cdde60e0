package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestNetworkListenerNeedsTLS(t *testing.T) {
	opts := Options{DataDir: t.TempDir(), Listen: "0.0.0.0:4222"}
	opts.EnsureDefaults()
	err := opts.Validate()
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "--tls-self-signed") || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("err = %v, want a refusal that says how", err)
	}
	for _, ok := range []Options{
		{DataDir: "d", Listen: "127.0.0.1:4222"}, {DataDir: "d", Listen: "localhost:0"}, {DataDir: "d", Listen: "[::1]:0"},
		{DataDir: "d", Listen: "0.0.0.0:0", Insecure: true}, {DataDir: "d", Listen: ":0", TLSSelfSigned: true},
	} {
		ok.EnsureDefaults()
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	bad := Options{DataDir: "d", Listen: "0.0.0.0:0", TLSCert: "c.pem"}
	bad.EnsureDefaults()
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("cert without key: %v", err)
	}
}

func TestSelfSignedTLS(t *testing.T) {
	ctx := testContext(t)
	opts := Options{DataDir: t.TempDir(), Listen: "0.0.0.0:0", TLSSelfSigned: true, Sync: SyncInterval}
	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info, err := ReadInfo(opts.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if info.TLSFingerprint == "" || info.TLSFingerprint != b.TLSFingerprint() || len(strings.Split(info.TLSFingerprint, ":")) != 32 {
		t.Fatalf("fingerprint %q in server.json, %q served", info.TLSFingerprint, b.TLSFingerprint())
	}
	if st, err := os.Stat(filepath.Join(opts.DataDir, TLSDir, "key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	c, err := Connect(ctx, Options{DataDir: opts.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Conn().TLSRequired() {
		t.Fatal("the client connected without TLS")
	}
	// A client that does not trust the certificate is refused.
	if _, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds)); err == nil {
		t.Fatal("connected without trusting the certificate")
	}
	// The certificate is kept: a restart serves the same one.
	fp := b.TLSFingerprint()
	c.Close()
	b.Close()
	b, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.TLSFingerprint() != fp {
		t.Fatal("a restart generated a new certificate")
	}
}
