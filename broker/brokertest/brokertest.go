// Package brokertest starts real embedded brokers for tests, and polls for
// conditions with a deadline instead of sleeping.
package brokertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/internal/poll"
)

// Timeout bounds each test's broker operations.
const Timeout = 60 * time.Second

// Context returns a context that ends with the test or after Timeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Options returns broker options for a fresh data directory under t.TempDir():
// no listener, interval sync (tests measure behaviour, not durability).
func Options(t testing.TB) broker.Options {
	return broker.Options{DataDir: t.TempDir(), Listen: broker.ListenNone, Sync: broker.SyncInterval}
}

// Start starts an embedded broker with opts and closes it when the test ends.
func Start(t testing.TB, opts broker.Options) *broker.Broker {
	t.Helper()
	b, err := broker.Start(Context(t), opts)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return b
}

// Eventually polls cond every few milliseconds until it returns true, failing the
// test with msg if it has not by the deadline.
func Eventually(t testing.TB, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("not within %s: %s", within, msg)
	}
}

// Poll calls cond every few milliseconds until it returns true, and reports
// whether it did within the time: for callers that are not a testing.TB (a
// testscript command).
func Poll(within time.Duration, cond func() bool) bool {
	return poll.Until(within, cond)
}

// StartMutable starts an embedded broker, without authentication, whose SYLK
// stream allows deleting and purging messages: for tests that need sequence
// gaps or an emptied stream. The real SYLK refuses both.
func StartMutable(t testing.TB) *broker.Broker {
	t.Helper()
	opts := Options(t)
	opts.NoAuth = true
	b := Start(t, opts)
	ctx := Context(t)
	js := b.JetStream()
	if err := js.DeleteStream(ctx, broker.Stream); err != nil {
		t.Fatalf("delete SYLK: %v", err)
	}
	cfg := broker.StreamConfig(broker.DefaultDuplicateWindow)
	cfg.DenyDelete, cfg.DenyPurge = false, false
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("recreate SYLK: %v", err)
	}
	return b
}

// FreeAddrs returns n loopback HOST:PORT addresses free at the time of the
// call (broker.FreeLoopbackAddrs).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := broker.FreeLoopbackAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// ClusterDataDirs makes n data directories under t.TempDir() for the members
// of one cluster: the first one's credentials (<data>/auth), made by
// broker.LoadAuth, and what seed adds (nil: nothing), copied into the others,
// as a user copies them before starting the other members.
func ClusterDataDirs(t testing.TB, n int, seed func(dataDir string) error) []string {
	t.Helper()
	root := t.TempDir()
	first := filepath.Join(root, "m0")
	if _, err := broker.LoadAuth(first); err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		if err := seed(first); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{first}
	for i := 1; i < n; i++ {
		d := filepath.Join(root, fmt.Sprintf("m%d", i))
		if err := os.CopyFS(d, os.DirFS(first)); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// ClusterOptions returns the broker options of member i of a cluster whose
// members route on addrs: the other addresses are its routes.
func ClusterOptions(dataDir string, addrs []string, i, replicas int) broker.Options {
	var routes []string
	for j, a := range addrs {
		if j != i {
			routes = append(routes, a)
		}
	}
	return broker.Options{
		DataDir: dataDir, Listen: "127.0.0.1:0", Sync: broker.SyncInterval, Replicas: replicas,
		Cluster: broker.Cluster{Name: "test", Listen: addrs[i], Routes: routes},
	}
}

// StartMembers starts the members which of a cluster (made by
// ClusterDataDirs, routing on addrs) concurrently, since each waits for the
// others, and closes them when the test ends.
func StartMembers(t testing.TB, dirs, addrs []string, which []int, replicas int) []*broker.Broker {
	t.Helper()
	members := make([]*broker.Broker, len(which))
	errs := make([]error, len(which))
	var wg sync.WaitGroup
	for k, i := range which {
		wg.Go(func() {
			members[k], errs[k] = broker.Start(Context(t), ClusterOptions(dirs[i], addrs, i, replicas))
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, b := range members {
			if b != nil {
				b.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return members
}
