package agents

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// toolAudit is an audit record of a tool call and the key its id derives
// from.
type toolAudit struct {
	key string
	rec schemas.AuditRecord
}

// refusals are the errors by which the executor denied a call.
var refusals = []error{tools.ErrPermissionDenied, tools.ErrPathEscape, tools.ErrUnknownTool}

// toolAudits are the audit records of what a call did that its tool_result
// does not say (seed L13421-13469): a file written, with its size and
// SHA-256; a sensitive file not shown; a process killed, with its pid and
// the signals; a call the executor denied.
func toolAudits(call tools.Call, args map[string]any, out tools.Result, runErr error) []toolAudit {
	target := schemas.ToolTarget(args)
	var recs []toolAudit
	for _, r := range refusals {
		if errors.Is(runErr, r) {
			recs = append(recs, toolAudit{"denied", schemas.AuditRecord{Category: schemas.AuditPermission, Action: call.Tool, Target: target,
				Outcome: schemas.OutcomeDenied, Reason: runErr.Error(), Details: map[string]string{"call": call.ID}}})
			break
		}
	}
	var data struct {
		Path    string `json:"path"`
		Bytes   *int   `json:"bytes"`
		SHA256  string `json:"sha256"`
		Created bool   `json:"created"`
		Stubbed bool   `json:"stubbed"`
	}
	if out.OK && len(out.Data) > 0 && json.Unmarshal(out.Data, &data) == nil {
		switch {
		case (call.Tool == tools.ToolWriteFile || call.Tool == tools.ToolEditFile) && data.Bytes != nil:
			action := "modify"
			if data.Created {
				action = "create"
			}
			recs = append(recs, toolAudit{"write", schemas.AuditRecord{Category: schemas.AuditFile, Action: action, Target: data.Path,
				Outcome: schemas.OutcomeAllowed, Details: map[string]string{"size": strconv.Itoa(*data.Bytes), "sha256": data.SHA256, "call": call.ID, "tool": call.Tool}}})
		case call.Tool == tools.ToolReadFile && data.Stubbed:
			recs = append(recs, toolAudit{"sensitive", schemas.AuditRecord{Category: schemas.AuditFile, Action: "read", Target: data.Path,
				Outcome: schemas.OutcomeDenied, Reason: out.Summary, Details: map[string]string{"call": call.ID}}})
		}
	}
	if len(out.KillSignals) > 0 {
		reason := "stopped"
		switch {
		case out.TimedOut:
			reason = "timed out"
		case out.Canceled:
			reason = "canceled"
		}
		recs = append(recs, toolAudit{"kill", schemas.AuditRecord{Category: schemas.AuditProcess, Action: "kill", Target: target,
			Outcome: schemas.OutcomeAllowed, Reason: reason, Details: map[string]string{
				"pid": strconv.Itoa(out.PID), "signals": strings.Join(out.KillSignals, ","), "call": call.ID}}})
	}
	return recs
}
