package render

import (
	"fmt"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
)

// PrintEvent prints one event of the log: a line of text, or with asJSON
// the stream position and the envelope (or why the bytes are not one).
func PrintEvent(io *cmdutil.IOStreams, ev *events.Event, asJSON bool) error {
	if asJSON {
		b, err := ev.AppendLine(nil, nil)
		if err != nil {
			return err
		}
		_, err = io.Out.Write(append(b, '\n'))
		return err
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
