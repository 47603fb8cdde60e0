package tail

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// checkLive refuses what does not apply to live tokens.
func checkLive(cmd *cobra.Command, args []string, opts *TailOptions) error {
	if len(args) > 0 {
		return cmdutil.Usagef("--live takes no SUBJECT: it follows sylk.live.<session>.>; use --session")
	}
	for _, name := range []string{"since", "no-follow", "source", "target", "type"} {
		if cmd.Flags().Changed(name) {
			return cmdutil.Usagef("--%s does not apply to --live: live tokens are not stored, only shown as they stream", name)
		}
	}
	if opts.Filter.Session != "" {
		if err := schemas.CheckName("--session", opts.Filter.Session); err != nil {
			return cmdutil.UsageError{Err: err}
		}
	}
	return nil
}

// liveSubject is what `tail --live` subscribes to.
func liveSubject(session string) string {
	if session == "" {
		return events.LivePrefix + ".>"
	}
	return events.LivePrefix + "." + session + ".>"
}

// tailLive prints the stream_chunk envelopes published while LLM calls
// stream, grouped by call: a header when another call's pieces begin, the
// text as it comes, and a closing line when the call ends.
func tailLive(ctx context.Context, f *cmdutil.Factory, opts *TailOptions) error {
	b, err := f.Broker(ctx)
	if err != nil {
		return err
	}
	if b.Embedded() {
		return fmt.Errorf("no sylk server runs on %s: live tokens stream only while one does (start 'sylk serve'); the stored answers are llm_response events: sylk tail --type llm_response", f.BrokerOptions().DataDir)
	}
	msgs := make(chan *nats.Msg, 1024)
	sub, err := b.Conn().ChanSubscribe(liveSubject(opts.Filter.Session), msgs)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := b.Conn().Flush(); err != nil {
		return err
	}
	p := &livePrinter{io: f.IO, json: opts.JSON}
	ended := 0
	for {
		select {
		case <-ctx.Done():
			p.close()
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil // Ctrl-C
			}
			return ctx.Err()
		case m := <-msgs:
			env, err := schemas.Unmarshal(m.Data)
			if err != nil || env.Type != schemas.TypeStreamChunk {
				continue // not a chunk: nothing to show
			}
			c, err := schemas.PayloadAs[schemas.StreamChunk](env)
			if err != nil {
				continue
			}
			if err := p.print(env, c); err != nil {
				return err
			}
			if c.Kind == "end" || c.Kind == "error" {
				if ended++; opts.Count > 0 && ended >= opts.Count {
					p.close()
					return nil
				}
			}
		}
	}
}

// livePrinter groups chunks by call: concurrent calls interleave, so a call's
// header is repeated when its pieces resume after another's.
type livePrinter struct {
	io      *cmdutil.IOStreams
	json    bool
	current string // the call whose text is being written
	midLine bool
}

func (p *livePrinter) print(env *schemas.Envelope, c *schemas.StreamChunk) error {
	if p.json {
		return p.io.PrintJSON(env)
	}
	w := p.io.Out
	if c.CallID != p.current {
		p.close()
		fmt.Fprintf(w, "── %s  %s  call %s\n", env.SessionID, env.Source, c.CallID)
		p.current = c.CallID
	}
	switch c.Kind {
	case "text":
		fmt.Fprint(w, c.Text)
		p.midLine = c.Text != "" && c.Text[len(c.Text)-1] != '\n'
	case "tool_start":
		p.newline()
		fmt.Fprintf(w, "→ %s ", c.Text)
		p.midLine = true
	case "tool_delta":
		fmt.Fprint(w, c.Text)
		p.midLine = true
	case "end":
		p.newline()
		fmt.Fprintf(w, "── end (%s)\n", render.OrDash(c.Text))
		p.current = ""
	case "error":
		p.newline()
		fmt.Fprintf(w, "── error: %s (the call is retried)\n", c.Text)
		p.current = ""
	}
	return nil
}

func (p *livePrinter) newline() {
	if p.midLine {
		fmt.Fprintln(p.io.Out)
		p.midLine = false
	}
}

// close ends a call's text that was cut off by another's.
func (p *livePrinter) close() {
	p.newline()
	p.current = ""
}
