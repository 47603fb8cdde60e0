// Package web is `sylk web`: the address of the running server's web view.
package web

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	webview "github.com/sylk/sylk/cmd/sylk/internal/web"
)

func NewCmdWeb(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "web",
		Short: "The web view of a running server (sylk serve --http)",
	}
	cmd.AddCommand(newWebURLCmd(f))
	return cmd
}

// urlJSON is what `sylk web url --json` prints.
type urlJSON struct {
	URL   string `json:"url"`
	Base  string `json:"base"`
	Token string `json:"token"`
}

func newWebURLCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "url",
		Short: "Print the web view's address, with the token that opens it",
		Long: `Print the address of the web view that 'sylk serve --http HOST:PORT' serves on
the data directory, with its token. Open it in a browser: the page keeps the
token in a cookie (HttpOnly, this site only) and drops it from the address.

The token is derived from the credential the CLI reaches the server with (the
admin .creds file server.json names), so whoever may run sylk commands on this
data directory may open the page, and a request without the token is refused.
Scripts send it as "Authorization: Bearer TOKEN".`,
		Example: `  sylk web url
  xdg-open "$(sylk web url)"
  curl -H "Authorization: Bearer $(sylk web url --json | jq -r .token)" -d '{}' \
    "$(sylk web url --json | jq -r .base)/api/q/session.list"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := broker.ReadInfo(f.Cfg.Data)
			if err != nil {
				return err
			}
			if info.HTTP == "" {
				return fmt.Errorf("the server on %s (pid %d) serves no web view: start it with 'sylk serve --http 127.0.0.1:PORT'", f.Cfg.Data, info.PID)
			}
			secret, err := webview.Credential{CredsFile: info.Creds, Token: info.Token, User: info.User, Password: info.Password}.Secret()
			if errors.Is(err, webview.ErrNoCredential) {
				return fmt.Errorf("the server on %s runs without authentication: its web view's address is the one it printed at start", f.Cfg.Data)
			}
			if err != nil {
				return err
			}
			tok := webview.Token(secret)
			u := urlJSON{URL: info.HTTP + "/?token=" + tok, Base: info.HTTP, Token: tok}
			if asJSON {
				return f.IO.PrintJSON(u)
			}
			_, err = fmt.Fprintln(f.IO.Out, u.URL)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the address, the base URL and the token as JSON")
	return cmd
}
