package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Call is one tool invocation. ID is deterministic (see [CallID]) so a
// redelivered dispatch can find its recorded result; Args is the JSON object
// of the tool's arguments as an LLM or a plan file gives it.
type Call struct {
	ID   string          `json:"id" msgpack:"id"`
	Tool string          `json:"tool" msgpack:"tool"`
	Args json.RawMessage `json:"args,omitempty" msgpack:"args,omitempty"`
	// Permitted: the user allowed this exec call outside the agent's
	// command list (a permission decision), so that list is not checked.
	// The tool list still is.
	Permitted bool `json:"permitted,omitempty" msgpack:"permitted,omitempty"`
}

// Result is the outcome of a call that ran. It is plain data, meant to be
// recorded as an event and reused on redelivery, and every text in it has
// already passed through the executor's [Redactor].
//
// For exec and the git tools, Stdout and Stderr hold the captured streams,
// smart-truncated (see the package doc) when they are long; StdoutBytes and
// StderrBytes count everything the process wrote. For the file tools, Output
// holds the text (file content, listing, matches) and Data a structured form.
type Result struct {
	CallID string `json:"call_id" msgpack:"call_id"`
	Tool   string `json:"tool" msgpack:"tool"`

	// OK is true when the tool did what was asked: for a process, exit
	// status 0 without timeout or cancellation.
	OK bool `json:"ok" msgpack:"ok"`

	// ExitCode is the process exit status; -1 when the process was ended by
	// a signal (see Signal) or never ran; 127 when the program was not
	// found and 126 when it could not be executed, as a shell reports them.
	// Tools that run no process report 0 when OK and -1 when not.
	ExitCode int `json:"exit_code" msgpack:"exit_code"`
	// Signal names the signal that ended the process ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty" msgpack:"signal,omitempty"`
	// KillSignals lists the signals the kill sequence sent to the process
	// group, in order ("SIGINT", "SIGTERM", "SIGKILL").
	KillSignals []string `json:"kill_signals,omitempty" msgpack:"kill_signals,omitempty"`
	// PID is the process id (and process group id) of a process the tool
	// ran, for the audit of a kill; 0 when none ran.
	PID int `json:"pid,omitempty" msgpack:"pid,omitempty"`

	Output string `json:"output,omitempty" msgpack:"output,omitempty"`
	Stdout string `json:"stdout,omitempty" msgpack:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty" msgpack:"stderr,omitempty"`

	StdoutBytes int64 `json:"stdout_bytes,omitempty" msgpack:"stdout_bytes,omitempty"`
	StderrBytes int64 `json:"stderr_bytes,omitempty" msgpack:"stderr_bytes,omitempty"`
	StdoutLines int64 `json:"stdout_lines,omitempty" msgpack:"stdout_lines,omitempty"`
	StderrLines int64 `json:"stderr_lines,omitempty" msgpack:"stderr_lines,omitempty"`

	// Truncated is set when some of the output was left out of the result;
	// the text itself says where and how much.
	Truncated bool `json:"truncated,omitempty" msgpack:"truncated,omitempty"`
	// Partial is set when the tool was stopped before it finished (timeout
	// or cancellation): the output is what it wrote until then.
	Partial bool `json:"partial,omitempty" msgpack:"partial,omitempty"`
	// TimedOut is set when the adaptive timeout stopped the tool.
	TimedOut bool `json:"timed_out,omitempty" msgpack:"timed_out,omitempty"`
	// Canceled is set when the caller's context stopped the tool.
	Canceled bool `json:"canceled,omitempty" msgpack:"canceled,omitempty"`

	DurationMS int64 `json:"duration_ms" msgpack:"duration_ms"`
	// DurationUS is the same time in microseconds: a tool that takes less
	// than a millisecond (list, read) has a DurationMS of 0, not of this.
	DurationUS int64 `json:"duration_us,omitempty" msgpack:"duration_us,omitempty"`

	// Summary is one line for a person or an LLM: what ran, how it ended,
	// how much output, how many error and warning lines.
	Summary string `json:"summary,omitempty" msgpack:"summary,omitempty"`
	// Error explains why OK is false, in words a person and an LLM can act on.
	Error string `json:"error,omitempty" msgpack:"error,omitempty"`
	// Data is the structured result of non-exec tools (a JSON object).
	Data json.RawMessage `json:"data,omitempty" msgpack:"data,omitempty"`
}

// took records how long the tool ran, in milliseconds and in microseconds.
func (r *Result) took(d time.Duration) {
	r.DurationMS, r.DurationUS = d.Milliseconds(), d.Microseconds()
}

// Text renders the result as the content of a tool message for an LLM: the
// summary, the error if any, then the output or the two streams.
func (r Result) Text() string {
	var b strings.Builder
	if r.Summary != "" {
		b.WriteString(r.Summary)
		b.WriteByte('\n')
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", r.Error)
	}
	section := func(name, s string) {
		if s == "" {
			return
		}
		if name != "" {
			fmt.Fprintf(&b, "--- %s ---\n", name)
		}
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	section("", r.Output)
	section("stdout", r.Stdout)
	section("stderr", r.Stderr)
	return b.String()
}

// ToolSpec describes a tool for LLM tool calling: its name, what it does and
// the JSON Schema (draft 2020-12) of its arguments.
type ToolSpec struct {
	Name        string          `json:"name" msgpack:"name"`
	Description string          `json:"description" msgpack:"description"`
	Parameters  json.RawMessage `json:"parameters" msgpack:"parameters"`
	// ReadOnly is true for tools that change nothing in the work directory.
	ReadOnly bool `json:"read_only" msgpack:"read_only"`
}
