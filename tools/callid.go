package tools

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// CallID returns a deterministic call id derived from parts, for example the
// id of the event that asked for the call and the index of the call within it.
// The same parts always give the same id, so a redelivered dispatch computes
// the id of the call it made before and can find that call's recorded result.
// Parts are length-prefixed before hashing: ("ab", "c") and ("a", "bc") give
// different ids. The result is 32 lowercase hex digits, which satisfies the
// id rule [A-Za-z0-9_-]{1,64}.
func CallID(parts ...string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

const maxIDLen = 64

// validID reports whether s matches [A-Za-z0-9_-]{1,64}.
func validID(s string) bool {
	if len(s) == 0 || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkCall(c Call) error {
	if !validID(c.ID) {
		return fmt.Errorf("%w: call id %q must match [A-Za-z0-9_-]{1,64} (use tools.CallID)", ErrInvalidCall, truncForMsg(c.ID))
	}
	return nil
}

// truncForMsg shortens s for use inside an error message.
func truncForMsg(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
