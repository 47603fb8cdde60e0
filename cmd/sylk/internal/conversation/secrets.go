package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// ErrPromptHasSecret: the user's text held a secret and was neither sent nor
// stored.
var ErrPromptHasSecret = errors.New("the text holds a secret")

// RefuseSecrets checks what the user wrote (what names it: "the request")
// for secrets before anything stores or sends it (seed L12429-12458, a user
// prompt is rejected, not redacted). With findings it appends a
// prompt_rejected event with the masked findings only, to session (the
// system session when the session does not exist yet), and returns an error
// wrapping ErrPromptHasSecret that names them.
func RefuseSecrets(ctx context.Context, f *cmdutil.Factory, log *events.Log, session, what, text string) error {
	red, err := tools.NewRedactor(f.RuntimeConfig().Tools.Secrets)
	if err != nil {
		return err
	}
	found := red.Find(text)
	if len(found) == 0 {
		return nil
	}
	p := schemas.PromptRejected{Reason: fmt.Sprintf("%s holds %d secret(s); it was not stored or sent", what, len(found))}
	var lines []string
	for _, x := range found {
		p.Findings = append(p.Findings, schemas.SecretFinding{Pattern: x.Pattern, Context: x.Context})
		lines = append(lines, fmt.Sprintf("  %s: %q", x.Pattern, x.Context))
	}
	if session == "" {
		session = schemas.SystemSession
	}
	env, err := UserEvent(f, session, schemas.TypePromptRejected, p, nil)
	if err != nil {
		return err
	}
	env.Target = "user"
	if _, err := log.Append(ctx, env); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s was refused and not stored or sent:\n%s\nremove it; a tool that needs a credential reads it from the environment (SYLK_<SERVICE>_<KIND>), never from the prompt",
		ErrPromptHasSecret, what, strings.Join(lines, "\n"))
}
