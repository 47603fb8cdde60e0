package audit_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/highwayhash"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/audit"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const interval = 10

// signing runs a Signer on b until the test ends.
func signing(t *testing.T, b *broker.Broker, key ed25519.PrivateKey) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&audit.Signer{JS: b.JetStream(), Key: key, Interval: interval}).Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func appendInputs(t *testing.T, b *broker.Broker, n int) {
	t.Helper()
	log := events.New(b.JetStream())
	for i := range n {
		env, _ := schemas.New(schemas.TypeUserInput, "S1", "user", "", time.Now(), schemas.UserInput{Text: fmt.Sprint("hello ", i)})
		if _, err := log.Append(brokertest.Context(t), env); err != nil {
			t.Fatal(err)
		}
	}
}

func verify(t *testing.T, b *broker.Broker, key ed25519.PrivateKey, from uint64) *audit.Report {
	t.Helper()
	rep, err := audit.Verify(brokertest.Context(t), b.JetStream(), key.Public().(ed25519.PublicKey), from, interval)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestChainSignsAndVerifies(t *testing.T) {
	opts := brokertest.Options(t)
	b := brokertest.Start(t, opts)
	key, err := audit.LoadKey(opts.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(opts.DataDir, audit.KeyFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	stop := signing(t, b, key)
	appendInputs(t, b, 45)
	var rep *audit.Report
	brokertest.Eventually(t, 10*time.Second, "checkpoints through seq 40", func() bool {
		rep = verify(t, b, key, 0)
		return rep.SignedTo >= 40
	})
	if !rep.Valid || rep.Checkpoints < 4 || rep.Unsigned == 0 {
		t.Fatalf("report %+v", rep)
	}
	// A restarted signer continues the chain.
	stop()
	signing(t, b, key)
	appendInputs(t, b, 20)
	brokertest.Eventually(t, 10*time.Second, "checkpoints through seq 60", func() bool {
		rep = verify(t, b, key, 0)
		return rep.SignedTo >= 60
	})
	if !rep.Valid {
		t.Fatalf("after a restart: %+v", rep)
	}
	// From the middle: it starts at the range holding --from.
	if r := verify(t, b, key, 25); !r.Valid || r.From != 21 {
		t.Fatalf("--from 25: %+v", r)
	}
	// Another key's checkpoints do not verify.
	other, _ := audit.LoadKey(t.TempDir())
	if r := verify(t, b, other, 0); r.Valid || r.Problems[0].Kind != audit.ProblemSignature {
		t.Fatalf("verified with another key: %+v", r)
	}
}

// A message edited in the store's files while the server is stopped, and one
// removed, are reported at their sequences.
func TestTamperedAndRemovedMessagesAreNamed(t *testing.T) {
	opts := brokertest.Options(t)
	b, err := broker.Start(brokertest.Context(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := audit.LoadKey(opts.DataDir)
	stop := signing(t, b, key)
	appendInputs(t, b, 30)
	brokertest.Eventually(t, 10*time.Second, "checkpoints through seq 30", func() bool { return verify(t, b, key, 0).SignedTo >= 30 })
	stop()
	account := b.Auth().AccountPublicKey()
	b.Close()

	msgs := filepath.Join(opts.DataDir, "jetstream", "jetstream", account, "streams", broker.Stream, "msgs")
	editRecord(t, msgs, 5, func(seq *uint64, body []byte) { body[len(body)-1] ^= 0x20 })
	editRecord(t, msgs, 7, func(seq *uint64, body []byte) { *seq |= 1 << 63 }) // erased
	os.Remove(filepath.Join(msgs, "index.db"))

	b = brokertest.Start(t, opts)
	rep := verify(t, b, key, 0)
	found := map[string]uint64{}
	for _, p := range rep.Problems {
		found[p.Kind] = p.Seq
	}
	if rep.Valid || found[audit.ProblemModified] != 5 || found[audit.ProblemGap] != 7 || len(rep.Problems) != 2 {
		t.Fatalf("report %+v", rep)
	}
}

// editRecord changes the stored record of seq in the message blocks of dir
// and fixes its checksum, as someone with access to the files would.
func editRecord(t *testing.T, dir string, seq uint64, edit func(seq *uint64, body []byte)) {
	t.Helper()
	blks, _ := filepath.Glob(filepath.Join(dir, "*.blk"))
	le := binary.LittleEndian
	for _, path := range blks {
		var index uint32
		fmt.Sscanf(filepath.Base(path), "%d.blk", &index)
		buf, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+22 <= len(buf); {
			rl := le.Uint32(buf[i:]) &^ (1 << 31)
			rec := buf[i : i+int(rl)]
			if le.Uint64(rec[4:]) == seq {
				slen := int(le.Uint16(rec[20:]))
				hasHdr := le.Uint32(buf[i:])&(1<<31) != 0
				bodyStart := 22 + slen
				if hasHdr {
					bodyStart += 4
				}
				s := le.Uint64(rec[4:])
				edit(&s, rec[bodyStart:len(rec)-8])
				le.PutUint64(rec[4:], s)
				key := sha256.Sum256(fmt.Appendf(nil, "%s-%d", broker.Stream, index))
				hh, _ := highwayhash.New64(key[:])
				hh.Write(rec[4:20])
				hh.Write(rec[22 : 22+slen])
				hh.Write(rec[bodyStart : len(rec)-8])
				copy(rec[len(rec)-8:], hh.Sum(nil))
				if err := os.WriteFile(path, buf, 0o640); err != nil {
					t.Fatal(err)
				}
				return
			}
			i += int(rl)
		}
	}
	t.Fatalf("seq %d not found in %s", seq, dir)
}
