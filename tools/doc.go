// Package tools is the one place where Sylk's agents act on the world: it
// runs subprocesses and file operations for them, safely, and returns what
// happened as plain data. It uses only the standard library and knows nothing
// of NATS or of events; the agents layer records its results.
//
// # Calls and results
//
// An agent asks for a [Call]: a deterministic id (see [CallID]), a tool name
// and JSON arguments. [Executor.Run] either refuses the call with an error
// (permanent: [ErrUnknownTool], [ErrPermissionDenied], [ErrInvalidCall],
// [ErrInvalidArgs], [ErrPathEscape]) or runs it and returns a [Result]. A tool
// that runs and fails (a non-zero exit, a timeout, a missing file) is a
// Result with OK == false and an Error a person or an LLM can act on, not a
// Go error. Only when the caller's context ends does Run return both a
// partial Result and an error wrapping ctx.Err(): the call was interrupted
// and should be run again rather than recorded. A Result is JSON and msgpack
// friendly, and everything in it (and in every error) has passed through the
// [Redactor], so it can go into the event stream as it is; a redelivered
// dispatch finds it by its call id and reuses it.
//
// # Built-in tools
//
// exec (argv by default, a shell only with "shell": true), read_file,
// write_file, edit_file (exact replace), list, glob, grep, git_status,
// git_diff and git_commit. [Executor.Schemas] gives each one's name,
// description and JSON Schema for LLM tool calling; arguments are decoded
// strictly (unknown fields, wrong types and missing fields are refused with
// the field's name).
//
// # Permissions
//
// A [Policy] maps agent names to allowed tools, deny by default:
// [DefaultPolicy] gives the Sylk roster its defaults. Names are matched
// exactly; an unknown tool is refused as unknown, never treated as a read;
// groups (@read, @write) are explicit lists. For exec an agent may be limited
// to command prefixes. The exec tool can run any program the agent is allowed
// to run: the file system checks below bind the file tools, not what a
// program does, so grant exec only to agents that need it.
//
// # Subprocesses
//
// Every subprocess runs in its own process group. Cancellation and timeout
// run the kill sequence on the whole group (exec.Cmd.Cancel): SIGINT, then
// SIGTERM after [KillOptions].SIGINTGrace (5 s), then SIGKILL after
// SIGTERMGrace (3 s), so children and grandchildren that ignore signals die
// too; exec.Cmd.WaitDelay is the backstop. When the main process exits on
// its own, whatever it left in its group is killed. Run returns only when
// the group is gone (or, for a process stuck in the kernel, after KillWait,
// logged), with every goroutine it started finished: no zombie of ours, no
// orphan, no goroutine left behind. Processes that leave the group on
// purpose (setsid, daemons) are beyond this package's reach.
//
// Timeouts are adaptive: each command has a base timeout (per command
// prefix, default 60 s); output that is not noise extends it by
// ExtendOnOutput (30 s), while dots, spinners, progress bars and bare
// percentages do not; nothing runs past Max (30 m). The output of a stopped
// process is kept and the Result says Partial and TimedOut or Canceled.
//
// Children get a scrubbed environment: variables whose names look like
// credentials (*_API_KEY, *_TOKEN, *_SECRET, *_PASSWORD, AWS_*, ...; see
// [DefaultEnvBlocklist]) are removed, and their values are added to the
// secrets the Redactor removes. A call cannot set such variables. Pagers
// and credential prompts are disabled, and stdin is empty unless given.
//
// # Output
//
// Stdout and stderr are captured separately within [OutputOptions].MaxBytes
// each, however much a process writes. Long output is truncated smartly: the
// first HeadLines (50) and last TailLines (100) lines are kept, and in
// between the lines that mention errors, warnings, failures or panics, that
// hold a file:line[:col] location or are stack frames (up to
// ImportantLines); every gap is marked with the number of lines and bytes
// cut, over-long lines are cut at a token boundary and say how much was cut.
// The Result records exit code, signal, kill signals sent, duration, bytes
// and lines written, and whether anything was truncated. A caller that must
// see every line (to count test results over a huge output) uses
// [Executor.RunObserved]: each line, redacted, goes to its function as it is
// written, while the Result stays bounded.
//
// # Files
//
// Every path is resolved against the work directory and checked with
// filepath.Rel after resolving symbolic links (a path that does not exist
// yet through its nearest existing parent): "..", absolute paths and
// symlinks that lead outside are refused with [ErrPathEscape]. File I/O then
// goes through an os.Root, so a link swapped in after the check cannot lead
// out either. Writes are atomic (a temporary file in the same directory,
// fsync, rename) and keep the file's permission bits; .git is left to git.
//
// # Redaction
//
// The [Redactor] removes known secret shapes (provider API keys, bearer
// tokens, JWTs, PEM private keys, passwords in URLs, values of keys named
// like password/secret/token/api_key) and the literal values of configured
// and scrubbed secrets from any text. Values assigned in code from
// expressions (cfg.Secret, os.Getenv(...)) are left alone. A file that holds
// a secret is shown with the secret replaced; edit_file explains when
// old_text contains the replacement.
package tools
