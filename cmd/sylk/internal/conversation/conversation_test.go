package conversation

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// A notice ends the conversation it follows from, unless it is advisory:
// then the work goes on and the conversation waits for what ends it. A
// warning that ends it is a failure (the request was not done), like an
// error; information is not.
func TestNoticesEndTheConversationUnlessAdvisory(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	log := events.New(b.JetStream())
	ctx := brokertest.Context(t)
	advisory := schemas.Notice{Level: schemas.NoticeWarn, Text: "exec failed the same way before", Advisory: true}
	for _, tc := range []struct {
		name    string
		notices []schemas.Notice
		err     error
	}{
		{"warning", []schemas.Notice{advisory, {Level: schemas.NoticeWarn, Text: "this request waits"}}, cmdutil.ErrSilent},
		{"error", []schemas.Notice{advisory, {Level: schemas.NoticeError, Text: "planning failed"}}, cmdutil.ErrSilent},
		{"information", []schemas.Notice{advisory, {Level: schemas.NoticeInfo, Text: "plan dropped; nothing was run"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session := "S-" + strings.ReplaceAll(tc.name, " ", "-")
			request, err := schemas.NewUserEvent(schemas.TypeUserInput, session, time.Now(), schemas.UserInput{Text: "do it"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			from, err := log.Append(ctx, request)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.notices {
				env, err := schemas.New(schemas.TypeNotice, session, "architect", "user", time.Now(), n)
				if err != nil {
					t.Fatal(err)
				}
				env.CorrelationID, env.ParentID = request.ID, request.ID
				if _, err := log.Append(ctx, env); err != nil {
					t.Fatal(err)
				}
			}
			var out, errOut bytes.Buffer
			c := &Conversation{F: cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}),
				Log: log, Session: session, Corr: request.ID, From: from}
			if err := c.Run(ctx); err != tc.err {
				t.Fatalf("Run = %v, want %v\n%s", err, tc.err, errOut.String())
			}
			last := tc.notices[len(tc.notices)-1]
			for _, n := range tc.notices {
				if want := n.Level + " (architect): " + n.Text + "\n"; !strings.Contains(errOut.String(), want) {
					t.Fatalf("stderr lacks %q (the conversation ended before the %s notice):\n%s", want, last.Level, errOut.String())
				}
			}
		})
	}
}
