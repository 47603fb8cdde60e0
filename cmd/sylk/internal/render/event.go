package render

import (
	"fmt"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// eventJSON is one line of `tail --json`: the stream position and the envelope,
// or the reason the bytes are not one.
type eventJSON struct {
	Seq      uint64            `json:"seq"`
	Subject  string            `json:"subject"`
	Envelope *schemas.Envelope `json:"envelope,omitempty"`
	Invalid  string            `json:"invalid,omitempty"`
}

// PrintEvent prints one event of the log: a line of text, or with asJSON
// the stream position and the envelope (or why the bytes are not one).
func PrintEvent(io *cmdutil.IOStreams, ev *events.Event, asJSON bool) error {
	if asJSON {
		line := eventJSON{Seq: ev.Seq, Subject: ev.Subject, Envelope: ev.Env}
		if ev.Err != nil {
			line.Invalid = ev.Err.Error()
		}
		return io.PrintJSON(line)
	}
	_, err := fmt.Fprintln(io.Out, EventLine(ev))
	return err
}

// EventLine is an event in one line: seq, time, session, route, type and
// payload.
func EventLine(ev *events.Event) string {
	if ev.Err != nil {
		return fmt.Sprintf("%6d  %s  INVALID  %s  %v", ev.Seq, ev.Time.Local().Format("15:04:05.000"), ev.Subject, ev.Err)
	}
	e := ev.Env
	target := e.Target
	if target == "" {
		target = events.Unaddressed
	}
	return fmt.Sprintf("%6d  %s  %-12s %s→%s  %s  %s", ev.Seq, e.Timestamp.Local().Format("15:04:05.000"), e.SessionID, e.Source, target, e.Type, Summary(e, 100))
}
