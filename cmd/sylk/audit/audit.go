// Package audit is `sylk audit`: the tamper-evident audit chain over the
// event log.
package audit

import (
	"crypto/ed25519"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events/audit"
)

func NewCmdAudit(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify and query the tamper-evident audit chain",
		Long: `Every message stored in the event log is a link of a hash chain (its sequence,
stored time, subject, headers and exact bytes). The server appends a signed
audit_checkpoint event every 100 sequences, with the data directory's ed25519
key (<data>/audit/signing.key, 0600). 'sylk audit verify' replays the stream
and recomputes everything: a message changed or removed behind the server's
back, a broken chain or a bad signature is named by its sequence.

'sylk audit query' lists the audit log itself: permission decisions, file
writes, commands, LLM calls, session and configuration changes.`,
	}
	cmd.AddCommand(newKeyCmd(f), newVerifyCmd(f), newQueryCmd(f))
	return cmd
}

func newKeyCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "key",
		Short: "Print the public key the checkpoints are signed with",
		Long: `Print the hex ed25519 public key of the data directory's audit key. Keep a copy
elsewhere: with it, a verifier can tell the checkpoints are this server's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := audit.LoadKey(f.BrokerOptions().DataDir)
			if err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, audit.PublicKey(key))
			return nil
		},
	}
}

func newVerifyCmd(f *cmdutil.Factory) *cobra.Command {
	var from uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [--from SEQ] [--json]",
		Short: "Replay the event log and check it against the signed checkpoints",
		Long: `Replay the event log from the start (or from the checkpoint range holding
--from), recompute every message's hash and the chain, and check them against
the signed checkpoints. Exit 0 when everything holds, 3 when something does not:
each problem is printed with its sequence (modified, sequence_gap, inserted,
chain_break, bad_signature, missing_checkpoint). The last events, not yet in a
checkpoint, are counted as unsigned.`,
		Example: `  sylk audit verify
  sylk audit verify --from 50000
  sylk audit verify --json | jq '.problems[] | select(.kind == "modified") | .seq'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			key, err := audit.LoadKey(f.BrokerOptions().DataDir)
			if err != nil {
				return err
			}
			b, err := f.Broker(ctx)
			if err != nil {
				return err
			}
			rep, err := audit.Verify(ctx, b.JetStream(), key.Public().(ed25519.PublicKey), from, 0)
			if err != nil {
				return err
			}
			if asJSON {
				if err := f.IO.PrintJSON(rep); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintf(f.IO.Out, "seq %d  %s  %s\n", p.Seq, p.Kind, p.Detail)
				}
				state := "valid"
				if !rep.Valid {
					state = fmt.Sprintf("INVALID: %d problems", len(rep.Problems))
				}
				fmt.Fprintf(f.IO.Out, "%s: %d events from seq %d, %d checkpoints verified, signed through seq %d, %d not yet signed\n",
					state, rep.Events, rep.From, rep.Checkpoints, rep.SignedTo, rep.Unsigned)
			}
			if !rep.Valid {
				return cmdutil.ExitCodeError{Code: cmdutil.ExitFailure}
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "start at the checkpoint range holding this stream sequence")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
