// Package secrets refuses the user's own text when it holds a secret: the
// CLI's requests and answers and the web view's answers alike.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// ErrFound: the user's text held a secret and was neither sent nor stored.
var ErrFound = errors.New("the text holds a secret")

// Refuse checks what the user wrote (what names it: "the request") for
// secrets before anything stores or sends it (seed L12429-12458, a user
// prompt is rejected, not redacted), with red. With findings it appends a
// prompt_rejected event dated now with the masked findings only, to session
// (the system session when the session does not exist yet), and returns an
// error wrapping ErrFound that names them.
func Refuse(ctx context.Context, red *tools.Redactor, log *events.Log, now time.Time, session, what, text string) error {
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
	env, err := schemas.NewUserEvent(schemas.TypePromptRejected, session, now, p, nil)
	if err != nil {
		return err
	}
	env.Target = "user"
	if _, err := log.Append(ctx, env); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s was refused and not stored or sent:\n%s\nremove it; a tool that needs a credential reads it from the environment (SYLK_<SERVICE>_<KIND>), never from the prompt",
		ErrFound, what, strings.Join(lines, "\n"))
}
