// Package user is `sylk user`: the NATS credentials the server issues to
// people, tools and agents in other processes.
package user

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func NewCmdUser(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Issue, list and revoke the credentials clients connect with",
		Long: `Every connection to the server authenticates with a NATS .creds file: a user JWT,
signed by the data directory's SYLK account, that carries the user's
permissions, and the user's secret key. Any NATS client accepts the file as it
is (nats.go UserCredentials, nats.js credsAuthenticator, nats --creds).

Roles, deny by default:
  admin            everything (but deleting or purging the event log)
  observer         read every event, create and read its own consumers, read-only
                   queries of sylk.api; no publishing, no administration
  agent:<kind>     an agent in another process: publish events from <kind>
                   only, read its own consumer agent-<kind>, dead-letter
  consumer:<name>  read and ack one existing durable consumer, nothing else

Credentials live in <data>/auth/users (0600). Issuing and revoking needs the
data directory's keys, so it runs on the server's machine.`,
	}
	cmd.AddCommand(newAddCmd(f), newLsCmd(f), newRevokeCmd(f))
	return cmd
}

// auth loads the data directory's credentials; there are none to manage on
// an external server's data directory.
func auth(f *cmdutil.Factory) (*broker.Auth, error) {
	if f.Cfg.NATSURL != "" {
		return nil, cmdutil.Usagef("users are managed on the machine whose data directory holds the server's keys; --nats-url points elsewhere")
	}
	return broker.LoadAuth(f.BrokerOptions().DataDir)
}

// record appends the audit record of a change to the credentials.
func record(ctx context.Context, f *cmdutil.Factory, action, target string, details map[string]string) error {
	b, err := f.Broker(ctx)
	if err != nil {
		return err
	}
	env, err := schemas.New(schemas.TypeAuditRecord, schemas.SystemSession, "user", "user", f.Now(), schemas.AuditRecord{
		Category: schemas.AuditConfig, Action: action, Target: target, Outcome: schemas.OutcomeAllowed, Details: details,
	})
	if err != nil {
		return err
	}
	_, err = events.New(b.JetStream()).Append(ctx, env)
	return err
}

func newAddCmd(f *cmdutil.Factory) *cobra.Command {
	var role string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add NAME --role ROLE",
		Short: "Issue a credential and write its .creds file",
		Example: `  sylk user add dashboard --role observer
  sylk user add engineer-2 --role agent:engineer
  sylk user add exporter --role consumer:export   # after: sylk consumer add export ...
  nats --creds ~/.local/share/sylk/auth/users/dashboard.creds sub 'sylk.v1.>'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := broker.ParseRole(role)
			if err != nil {
				return cmdutil.UsageError{Err: err}
			}
			a, err := auth(f)
			if err != nil {
				return err
			}
			u, err := a.AddUser(args[0], r)
			if errors.Is(err, broker.ErrInvalidRole) {
				return cmdutil.UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			if err := record(cmd.Context(), f, "user_add", u.Name, map[string]string{"role": u.Role, "public_key": u.PublicKey}); err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(u)
			}
			fmt.Fprintf(f.IO.Out, "user %s (%s): %s\n", u.Name, u.Role, u.Creds)
			fmt.Fprintf(f.IO.Out, "connect with it: nats --creds %s ..., nats.go nats.UserCredentials(%q)\n", u.Creds, u.Creds)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "admin, observer, agent:<kind> or consumer:<name>")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the user as JSON")
	cmd.MarkFlagRequired("role")
	return cmd
}

func newLsCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the issued credentials",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := auth(f)
			if err != nil {
				return err
			}
			users, err := a.Users()
			if err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(users)
			}
			w := tabwriter.NewWriter(f.IO.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tROLE\tSTATE\tISSUED\tCREDS")
			for _, u := range users {
				state := "active"
				if u.Revoked {
					state = "revoked"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", u.Name, u.Role, state, u.Issued.Format(time.RFC3339), u.Creds)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the users as JSON")
	return cmd
}

func newRevokeCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a credential: the running server closes its connections and refuses it from now on",
		Example: `  sylk user revoke dashboard
  sylk user add dashboard --role observer   # a new credential under the same name`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := auth(f); err != nil {
				return err
			}
			err := broker.RevokeUser(cmd.Context(), f.BrokerOptions().DataDir, args[0])
			if errors.Is(err, broker.ErrNoUser) || errors.Is(err, broker.ErrInvalidRole) {
				return cmdutil.UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			if err := record(cmd.Context(), f, "user_revoke", args[0], nil); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "user %s revoked\n", args[0])
			return nil
		},
	}
}
