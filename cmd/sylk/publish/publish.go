// Package publish is `sylk publish`: append one event to the log.
package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// PublishOptions are the flags of `sylk publish`.
type PublishOptions struct {
	Session     string
	Type        string
	Source      string
	Target      string
	Payload     string
	Correlation string
	Parent      string
	JSON        bool
}

func NewCmdPublish(f *cmdutil.Factory, runF func(context.Context, *cmdutil.Factory, *PublishOptions) error) *cobra.Command {
	opts := &PublishOptions{}
	cmd := &cobra.Command{
		Use:   "publish --session S --type T --payload JSON|@FILE|-",
		Short: "Append one event to the log",
		Long: `Append one envelope to the event log and print its stream sequence and id.

The payload is JSON for the type's payload struct (see 'sylk schema TYPE'); unknown
keys are refused. An event with no --target is addressed to the Guide, which
routes it. With no server running, an embedded one is started for this command.`,
		Example: `  sylk publish --session S1 --type user_input --payload '{"text":"hello"}'
  sylk publish --session S1 --type signal --payload '{"action":"pause","scope":"session"}'
  sylk publish --session S1 --type user_input --payload @msg.json --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), f, opts)
			}
			return publishRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Session, "session", "", `session id ("_" for the system session)`)
	fl.StringVar(&opts.Type, "type", "", "message type, e.g. user_input (see 'sylk schema')")
	fl.StringVar(&opts.Source, "source", "user", "who sends it")
	fl.StringVar(&opts.Target, "target", "", "agent it is addressed to (default: the Guide routes it)")
	fl.StringVar(&opts.Payload, "payload", "{}", "payload as JSON, @FILE to read a file, or - for stdin")
	fl.StringVar(&opts.Correlation, "correlation", "", "correlation id (default: the new event's id)")
	fl.StringVar(&opts.Parent, "parent", "", "id of the event this one answers")
	fl.BoolVar(&opts.JSON, "json", false, "print the result as JSON")
	cmd.MarkFlagRequired("session")
	cmd.MarkFlagRequired("type")
	return cmd
}

func publishRun(ctx context.Context, f *cmdutil.Factory, opts *PublishOptions) error {
	env, err := buildEnvelope(f, opts)
	if err != nil {
		return err
	}
	log, err := f.Log(ctx)
	if err != nil {
		return err
	}
	seq, err := log.Append(ctx, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "id": env.ID, "subject": events.Subject(env)})
	}
	fmt.Fprintf(f.IO.Out, "seq %d id %s subject %s\n", seq, env.ID, events.Subject(env))
	return nil
}

func buildEnvelope(f *cmdutil.Factory, opts *PublishOptions) (*schemas.Envelope, error) {
	t := schemas.Type(opts.Type)
	if !t.Known() {
		return nil, cmdutil.Usagef("--type %q is not a message type; 'sylk schema' lists them", opts.Type)
	}
	raw, err := readPayloadArg(f.IO.In, opts.Payload)
	if err != nil {
		return nil, err
	}
	p, err := decodePayloadJSON(t, raw)
	if err != nil {
		return nil, err
	}
	env, err := schemas.New(t, opts.Session, opts.Source, opts.Target, f.Now(), p)
	if err != nil {
		return nil, err
	}
	if opts.Correlation != "" {
		env.CorrelationID = opts.Correlation
	}
	env.ParentID = opts.Parent
	if err := schemas.Validate(env); err != nil {
		return nil, cmdutil.UsageError{Err: err}
	}
	return env, nil
}

func readPayloadArg(stdin io.Reader, arg string) ([]byte, error) {
	switch {
	case arg == "-":
		return io.ReadAll(stdin)
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, cmdutil.Usagef("--payload %s: %w", arg, err)
		}
		return b, nil
	}
	return []byte(arg), nil
}

// decodePayloadJSON reads JSON into t's payload struct, refusing unknown keys.
func decodePayloadJSON(t schemas.Type, raw []byte) (any, error) {
	p, err := schemas.NewPayload(t)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, cmdutil.Usagef("--payload: field %q wants a %s, got %s (see 'sylk schema %s')", te.Field, te.Type, te.Value, t)
		}
		return nil, cmdutil.Usagef("--payload for %s: %w (see 'sylk schema %s')", t, err, t)
	}
	return p, nil
}
