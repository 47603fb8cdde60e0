package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sylk/sylk/schemas"
)

// KeyFile is the audit signing key, in the data directory: the hex ed25519
// seed, readable by its owner only.
const KeyFile = "audit/signing.key"

// ErrBadKey means the key file is not an audit key.
var ErrBadKey = errors.New("bad audit key")

// LoadKey returns the data directory's audit signing key, creating it (0600)
// the first time.
func LoadKey(dataDir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		seed, err := hex.DecodeString(string(bytes.TrimSpace(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("%w: %s does not hold a hex ed25519 seed", ErrBadKey, path)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(key.Seed())+"\n"), 0o600); err != nil {
		return nil, err
	}
	return key, os.Rename(tmp, path)
}

// PublicKey is the hex public key of key, as checkpoints and `sylk audit
// key` show it.
func PublicKey(key ed25519.PrivateKey) string {
	return hex.EncodeToString(key.Public().(ed25519.PublicKey))
}

// signedBytes is what a checkpoint's signature covers.
func signedBytes(from, to uint64, prev, chain Hash) []byte {
	b := make([]byte, 0, 13+16+2*len(prev))
	b = append(b, "sylk-audit-v1"...)
	b = binary.BigEndian.AppendUint64(b, from)
	b = binary.BigEndian.AppendUint64(b, to)
	b = append(b, prev[:]...)
	return append(b, chain[:]...)
}

// newCheckpoint signs the range [from, to] whose leaves (zero for a missing
// sequence) fold from prev.
func newCheckpoint(key ed25519.PrivateKey, from, to uint64, prev Hash, leaves []Hash) (schemas.AuditCheckpoint, Hash) {
	chain := prev
	raw := make([]byte, 0, len(leaves)*len(prev))
	for _, l := range leaves {
		chain = Link(chain, l)
		raw = append(raw, l[:]...)
	}
	return schemas.AuditCheckpoint{
		FromSeq: from, ToSeq: to, PrevChain: hex.EncodeToString(prev[:]), Chain: hex.EncodeToString(chain[:]),
		Leaves: hex.EncodeToString(raw), PublicKey: PublicKey(key),
		Signature: hex.EncodeToString(ed25519.Sign(key, signedBytes(from, to, prev, chain))),
	}, chain
}

// checked is a checkpoint whose signature holds, decoded.
type checked struct {
	from, to    uint64
	prev, chain Hash
	leaves      []Hash
}

// checkCheckpoint verifies cp's signature with pub and that its leaves fold
// into its chain.
func checkCheckpoint(cp *schemas.AuditCheckpoint, pub ed25519.PublicKey) (*checked, error) {
	c := &checked{from: cp.FromSeq, to: cp.ToSeq}
	if err := decodeHash(cp.PrevChain, &c.prev); err != nil {
		return nil, fmt.Errorf("prev_chain: %w", err)
	}
	if err := decodeHash(cp.Chain, &c.chain); err != nil {
		return nil, fmt.Errorf("chain: %w", err)
	}
	sig, err := hex.DecodeString(cp.Signature)
	if err != nil || !ed25519.Verify(pub, signedBytes(c.from, c.to, c.prev, c.chain), sig) {
		return nil, errors.New("the signature does not verify with the audit key")
	}
	raw, err := hex.DecodeString(cp.Leaves)
	if err != nil || c.to < c.from || uint64(len(raw)) != (c.to-c.from+1)*uint64(len(c.prev)) {
		return nil, errors.New("its leaves do not match its range")
	}
	chain := c.prev
	for i := 0; i < len(raw); i += len(chain) {
		var l Hash
		copy(l[:], raw[i:])
		c.leaves = append(c.leaves, l)
		chain = Link(chain, l)
	}
	if chain != c.chain {
		return nil, errors.New("its leaves do not fold into its signed chain")
	}
	return c, nil
}

func decodeHash(s string, h *Hash) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return fmt.Errorf("%q is not a hex SHA-256", s)
	}
	copy(h[:], b)
	return nil
}
