// Package schema is `sylk schema`: the message types and their JSON Schemas.
package schema

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/schemas"
)

func NewCmdSchema(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "schema [TYPE]",
		Short: "List the message types, or print one type's JSON Schema",
		Long: `With no argument, list every message type with what it is for. With a TYPE,
print its JSON Schema document: the envelope (keys id, session_id, type, source,
timestamp, ...) with that type's payload. The documents describe the msgpack map an
event body decodes to; timestamps are RFC 3339 strings once converted to JSON,
durations integer nanoseconds.`,
		Example: `  sylk schema
  sylk schema task_dispatch > task_dispatch.schema.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				doc, err := schemas.JSONSchema(schemas.Type(args[0]))
				if err != nil {
					return cmdutil.Usagef("%q is not a message type; 'sylk schema' lists them", args[0])
				}
				_, err = f.IO.Out.Write(doc)
				return err
			}
			if asJSON {
				type entry struct {
					Type string `json:"type"`
					Doc  string `json:"doc"`
				}
				var out []entry
				for _, t := range schemas.Types() {
					out = append(out, entry{string(t), t.Doc()})
				}
				return f.IO.PrintJSON(out)
			}
			w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			for _, t := range schemas.Types() {
				fmt.Fprintf(w, "%s\t%s\n", t, t.Doc())
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "list the types as JSON")
	return cmd
}
