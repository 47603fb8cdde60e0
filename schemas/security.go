package schemas

import (
	"fmt"
	"slices"
	"strings"
)

// Security and audit types: the audit chain's signed checkpoints, the explicit
// audit records of what no other event says, refused prompts, and permission
// requests and decisions.
const (
	TypeAuditCheckpoint Type = "audit_checkpoint"
	TypeAuditRecord     Type = "audit_record"
	TypePromptRejected  Type = "prompt_rejected"
)

var securityTypes = map[Type]typeInfo{
	TypeAuditCheckpoint: entry[AuditCheckpoint]("A signed checkpoint of the audit chain over a range of stream sequences."),
	TypeAuditRecord:     entry[AuditRecord]("An audited action no other event records: a file write, a process kill, a denial."),
	TypePromptRejected:  entry[PromptRejected]("A user prompt refused because it holds a secret; the prompt is not stored."),
}

// AuditCheckpoint signs the audit chain up to ToSeq (seed L13621-13635).
// Leaves holds, in hex, the 32-byte SHA-256 leaf hash of each stored message
// from FromSeq to ToSeq (all zero for a sequence the stream did not hold), so
// a verifier names the very message that changed; Chain (hex) folds them onto
// PrevChain, the chain at FromSeq-1. Signature (hex) is the ed25519 signature
// of the audit key over "sylk-audit-v1", FromSeq, ToSeq, PrevChain and Chain.
type AuditCheckpoint struct {
	FromSeq   uint64 `json:"from_seq"`
	ToSeq     uint64 `json:"to_seq"`
	PrevChain string `json:"prev_chain"`
	Chain     string `json:"chain"`
	Leaves    string `json:"leaves"`
	PublicKey string `json:"public_key"`
	Signature string `json:"signature"`
}

// Audit categories (seed L13421-13469).
const (
	AuditPermission = "permission"
	AuditFile       = "file"
	AuditProcess    = "process"
	AuditNetwork    = "network"
	AuditLLM        = "llm"
	AuditSession    = "session"
	AuditConfig     = "config"
)

// AuditCategories lists the audit categories.
var AuditCategories = []string{AuditPermission, AuditFile, AuditProcess, AuditNetwork, AuditLLM, AuditSession, AuditConfig}

// IsAuditCategory reports whether c is an audit category.
func IsAuditCategory(c string) bool { return slices.Contains(AuditCategories, c) }

// Audit outcomes.
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
	OutcomeError   = "error"
	// OutcomeAsked: a permission request waiting for the user's answer.
	OutcomeAsked = "asked"
)

// AuditOutcomes lists the audit outcomes.
var AuditOutcomes = []string{OutcomeAllowed, OutcomeDenied, OutcomeError, OutcomeAsked}

// AuditRecord is an audit entry for an action no other event records.
type AuditRecord struct {
	Category string            `json:"category"`
	Action   string            `json:"action"`
	Target   string            `json:"target,omitempty"`
	Outcome  string            `json:"outcome"`
	Reason   string            `json:"reason,omitempty"`
	Details  map[string]string `json:"details,omitempty"`
}

// SecretFinding is one secret found in text, without its value: the pattern
// and the text around it with the secret masked (seed L12671-12678).
type SecretFinding struct {
	Pattern string `json:"pattern"`
	Context string `json:"context"`
}

// PromptRejected says a user prompt was refused for holding secrets. The
// prompt itself is never stored.
type PromptRejected struct {
	Findings []SecretFinding `json:"findings,omitempty"`
	Reason   string          `json:"reason"`
}

// ToolTarget is what a tool call with args acts on, for a person reading
// the audit: the command line, or the path and pattern.
func ToolTarget(args map[string]any) string {
	if argv, ok := args["argv"].([]any); ok {
		// Built in one buffer sized for its strings: the audit fold reads
		// every tool call's target, and a string per word (fmt.Sprint) and
		// their join were five allocations a call.
		n := len(argv)
		for _, a := range argv {
			if s, ok := a.(string); ok {
				n += len(s)
			}
		}
		var b strings.Builder
		b.Grow(n)
		for i, a := range argv {
			if i > 0 {
				b.WriteByte(' ')
			}
			s, ok := a.(string)
			if !ok {
				s = fmt.Sprint(a)
			}
			b.WriteString(s)
		}
		return b.String()
	}
	if c, ok := args["command"].(string); ok && c != "" {
		return c
	}
	var parts []string
	for _, k := range []string{"path", "pattern", "message"} {
		if s, ok := args[k].(string); ok && s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}
