package projections

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// callKeys is a bloom filter of the keys of the calls projection: every key
// Pebble holds under callsPrefix, once the scan Open starts has added those
// the store held then; the fold adds each new one before its batch commits.
// Agents look up a call's record before every side effect (a tool run, an
// LLM call, a skill selection, a hook decision) and the fold looks it up
// again before storing it, and nearly every lookup misses: in a live store
// a miss walks Pebble's memtable, cold by then: 20-40 µs each in the
// pipeline benchmark's profiles under load (about 1 µs warm). The filter
// answers those misses from memory. It never forgets a key, so one
// deleted since stays a harmless maybe; until the scan ends (or if it
// fails) every lookup reads Pebble as before.
type callKeys struct {
	bits  []atomic.Uint64
	seed  maphash.Seed
	ready atomic.Bool
	stop  chan struct{} // closed by Close
	done  chan struct{} // closed when the scan ends
}

var callsPrefix = []byte("calls/")

// callKeysBits sizes the filter: 2 MiB, about one false positive in a
// thousand lookups at a million recorded calls.
const (
	callKeysBits   = 1 << 24
	callKeysHashes = 6
)

func newCallKeys() *callKeys {
	return &callKeys{bits: make([]atomic.Uint64, callKeysBits/64), seed: maphash.MakeSeed(),
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (f *callKeys) positions(k []byte, fn func(i uint64) bool) bool {
	return bloomPositions(maphash.Bytes(f.seed, k), callKeysBits, callKeysHashes, fn)
}

// add records k, before the batch that writes it commits (a nil filter, a
// fold's outside a store, records nothing).
func (f *callKeys) add(k []byte) {
	if f == nil {
		return
	}
	f.positions(k, func(i uint64) bool {
		f.bits[i/64].Or(1 << (i % 64))
		return true
	})
}

// absent reports whether Pebble surely holds no k.
func (f *callKeys) absent(k []byte) bool {
	return f != nil && f.ready.Load() && !f.positions(k, func(i uint64) bool { return f.bits[i/64].Load()&(1<<(i%64)) != 0 })
}

// scan adds the calls keys db holds, then marks the filter ready; Close
// stops it.
func (f *callKeys) scan(db *pebble.DB) error {
	defer close(f.done)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: callsPrefix, UpperBound: prefixEnd(callsPrefix)})
	if err != nil {
		return err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 {
			select {
			case <-f.stop:
				return it.Close()
			default:
			}
		}
		f.add(it.Key())
	}
	if err := it.Close(); err != nil {
		return err
	}
	f.ready.Store(true)
	return nil
}
