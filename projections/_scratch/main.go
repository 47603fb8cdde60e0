package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func main() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "exp")
	defer os.RemoveAll(dir)
	b, err := broker.Start(ctx, broker.Options{DataDir: dir, Listen: broker.ListenNone, Sync: broker.SyncInterval})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	log := events.New(b.JetStream())
	n := 200000
	t0 := time.Now()
	for i := 0; i < n; i++ {
		env, _ := schemas.New(schemas.TypeTaskComplete, fmt.Sprintf("S%d", i%10000), "engineer", "orchestrator", time.Now(), schemas.TaskComplete{DAGID: "d1", NodeID: fmt.Sprintf("n%d", i), Attempt: 1, Summary: "did the thing and it went well", Evidence: "ok 12 tests passed"})
		if _, err := log.AppendAsync(env); err != nil {
			panic(err)
		}
	}
	log.Flush(ctx)
	fmt.Println("gen", time.Since(t0))
	js := b.JetStream()
	// raw
	t0 = time.Now()
	cons, _ := js.OrderedConsumer(ctx, broker.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"sylk.v1.>"}})
	it, _ := cons.Messages()
	var bytes int
	type kv struct{ k, v []byte }
	var kvs []kv
	for {
		m, err := it.Next()
		if err != nil {
			panic(err)
		}
		md, _ := m.Metadata()
		bytes += len(m.Data())
		k := binary.BigEndian.AppendUint64([]byte("log/S123/"), md.Sequence.Stream)
		kvs = append(kvs, kv{k, m.Data()})
		if md.NumPending == 0 {
			break
		}
	}
	it.Stop()
	d := time.Since(t0)
	fmt.Printf("raw read %v %.0f/s avg %d bytes\n", d, float64(n)/d.Seconds(), bytes/n)
	t0 = time.Now()
	cnt := 0
	log.Scan(ctx, "sylk.v1.>", events.Cursor{}, 0, func(ev *events.Event) error { cnt++; return nil })
	d = time.Since(t0)
	fmt.Printf("events scan %v %.0f/s\n", d, float64(cnt)/d.Seconds())
	t0 = time.Now()
	for _, x := range kvs {
		env, err := schemas.Unmarshal(x.v)
		if err != nil {
			panic(err)
		}
		if _, err := schemas.PayloadAs[schemas.TaskComplete](env); err != nil {
			panic(err)
		}
	}
	d = time.Since(t0)
	fmt.Printf("decode %v %.0f/s\n", d, float64(n)/d.Seconds())
	db, err := pebble.Open(dir+"/peb", &pebble.Options{})
	if err != nil {
		panic(err)
	}
	t0 = time.Now()
	bt := db.NewBatch()
	for i, x := range kvs {
		bt.Set(x.k, x.v, nil)
		if i%4096 == 4095 {
			bt.Commit(pebble.NoSync)
			bt = db.NewBatch()
		}
	}
	bt.Commit(pebble.Sync)
	d = time.Since(t0)
	fmt.Printf("pebble %v %.0f/s\n", d, float64(n)/d.Seconds())
	db.Close()
}
