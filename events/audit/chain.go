// Package audit makes the event log tamper-evident and answers audit
// queries (seed L13421-13746).
//
// Every message stored in SYLK is a leaf of a hash chain: the leaf is the
// SHA-256 of its stream sequence, stored time, subject, headers and exact
// bytes, and the chain at sequence n is SHA-256(chain at n-1 || leaf n). The
// Signer follows the stream and, every Interval sequences, appends an
// audit_checkpoint event holding that range's leaves and the chain at its
// end, signed with the data directory's ed25519 audit key. Verify replays the
// stream, recomputes every leaf and the chain, and checks them against the
// checkpoints: a changed message, a removed one (a sequence gap), a broken
// chain or a bad signature is reported with its sequence.
//
// JetStream's deny-delete and deny-purge keep the stream append-only for every
// client; the chain is what shows an edit made behind the server's back, in
// the files of its store.
package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"
)

// Hash is a leaf or chain hash.
type Hash = [sha256.Size]byte

// DefaultInterval is how many sequences a checkpoint covers.
const DefaultInterval = 100

// Leaf is the hash of one stored message.
func Leaf(seq uint64, stored time.Time, subject string, header map[string][]string, data []byte) Hash {
	var lh leafHasher
	return lh.leaf(seq, stored, subject, header, data)
}

// leafHasher computes leaves into buffers it reuses: a verify or a signer
// hashes every message of the stream, and allocating for each one's fields
// made the garbage collector the larger part of a verify's CPU time.
type leafHasher struct {
	buf  []byte
	keys []string
}

// leaf is Leaf: the SHA-256 of the sequence, the stored time, then the
// subject, each header (by name) and the data, each with its length so
// field boundaries cannot shift.
func (lh *leafHasher) leaf(seq uint64, stored time.Time, subject string, header map[string][]string, data []byte) Hash {
	b := binary.BigEndian.AppendUint64(lh.buf[:0], seq)
	b = binary.BigEndian.AppendUint64(b, uint64(stored.UnixNano()))
	b = appendField(b, subject)
	keys := lh.keys[:0]
	for k := range header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range header[k] {
			b = appendField(b, k)
			b = appendField(b, v)
		}
	}
	b = appendField(b, data)
	lh.buf, lh.keys = b, keys
	return sha256.Sum256(b)
}

// appendField appends f with its length.
func appendField[T string | []byte](b []byte, f T) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
	return append(b, f...)
}

// Link is the chain after leaf, from prev.
func Link(prev, leaf Hash) Hash {
	var buf [2 * sha256.Size]byte
	copy(buf[:], prev[:])
	copy(buf[sha256.Size:], leaf[:])
	return sha256.Sum256(buf[:])
}

// rangeOf is the checkpoint range holding seq: (from, to).
func rangeOf(seq, interval uint64) (uint64, uint64) {
	from := (seq-1)/interval*interval + 1
	return from, from + interval - 1
}
