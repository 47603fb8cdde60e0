package conversation

import (
	"context"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/secrets"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/tools"
)

// ErrPromptHasSecret: the user's text held a secret and was neither sent nor
// stored.
var ErrPromptHasSecret = secrets.ErrFound

// RefuseSecrets is secrets.Refuse with the configured secret patterns.
func RefuseSecrets(ctx context.Context, f *cmdutil.Factory, log *events.Log, session, what, text string) error {
	red, err := tools.NewRedactor(f.RuntimeConfig().Tools.Secrets)
	if err != nil {
		return err
	}
	return secrets.Refuse(ctx, red, log, f.Now(), session, what, text)
}
