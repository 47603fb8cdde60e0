package tools

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// Secrets planted in the environment and in files never reach a result:
// children do not inherit credential variables, and whatever a child or a
// file shows is redacted, including the literal values of the scrubbed
// variables and the configured secrets.
func TestSecretsNeverAppearInResults(t *testing.T) {
	const (
		serviceToken = "svc-tok-4f9a8b7c6d5e"     // matches no shape: only known as a value
		configured   = "configured-secret-Q9w8e7" // from SecretOptions.Values
		dbPassword   = "pg-pass-Zx81"             // value of PGPASSWORD
	)
	e := newTestExecutor(t, func(o *Options) {
		o.Env.Base = append(o.Env.Base,
			"OPENAI_API_KEY="+openAIKey,
			"MY_SERVICE_TOKEN="+serviceToken,
			"AWS_SECRET_ACCESS_KEY="+awsSecret,
			"PGPASSWORD="+dbPassword,
			"HARMLESS=visible-value",
		)
		o.Secrets.Values = []string{configured}
	})
	secrets := []string{openAIKey, serviceToken, awsSecret, dbPassword, configured, githubPAT, jwt, "MIIEowIBAAKCAQEA", "hunter22"}
	// A file holding secrets, as a dotfile or a config might.
	writeFile(t, filepath.Join(e.WorkDir(), "leaky.env"), strings.Join([]string{
		"OPENAI=" + openAIKey, "TOKEN_COPY " + serviceToken, "aws " + awsSecret, "pg " + dbPassword,
		"cfg " + configured, "gh " + githubPAT, "jwt " + jwt, privateKey, "DB_PASSWORD=hunter22", "plain line",
	}, "\n")+"\n")

	check := func(what string, r Result, err error) {
		t.Helper()
		b, _ := json.Marshal(r)
		all := string(b)
		if err != nil {
			all += err.Error()
		}
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("%s: secret %q leaked: %s", what, s, all)
			}
		}
	}

	// The environment of a child.
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"env"}})
	check("env", r, nil)
	for _, name := range []string{"OPENAI_API_KEY", "MY_SERVICE_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD"} {
		if strings.Contains(r.Stdout, name+"=") {
			t.Errorf("child inherited %s", name)
		}
	}
	if !strings.Contains(r.Stdout, "HARMLESS=visible-value") || !strings.Contains(r.Stdout, "GIT_TERMINAL_PROMPT=0") {
		t.Errorf("child environment lacks ordinary variables: %q", r.Stdout)
	}

	// Output of a child that reads the file, on stdout and stderr.
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "cat leaky.env; cat leaky.env >&2", "shell": true})
	check("cat", r, nil)
	if !strings.Contains(r.Stdout, DefaultRedaction) || !strings.Contains(r.Stdout, "plain line") {
		t.Errorf("cat output not redacted as expected: %q", r.Stdout)
	}

	// File tools.
	r = mustRun(t, e, "engineer", ToolReadFile, map[string]any{"path": "leaky.env"})
	check("read_file", r, nil)
	r = mustRun(t, e, "engineer", ToolGrep, map[string]any{"pattern": "."})
	check("grep", r, nil)
	if !json.Valid(r.Data) {
		t.Errorf("redacted grep data is not valid JSON: %s", r.Data)
	}

	// Arguments echoed in errors.
	_, err := run(t, e, "engineer", ToolReadFile, map[string]any{"path": "../" + serviceToken})
	check("escape error", Result{}, err)
	if !errors.Is(err, ErrPathEscape) {
		t.Errorf("redacted error lost its sentinel: %v", err)
	}

	// A call cannot hand a credential to a child.
	_, err = run(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"env"}, "env": map[string]string{"GITHUB_TOKEN": "x"}})
	if !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("credential in call env: %v", err)
	}

	// The executor's redactor knows the scrubbed values, for other text.
	if got := e.Redactor().Redact("token " + serviceToken); strings.Contains(got, serviceToken) {
		t.Errorf("Redactor() does not know scrubbed values: %q", got)
	}
}

func TestEnvScrubber(t *testing.T) {
	s := newEnvScrubber(EnvOptions{Block: DefaultEnvBlocklist(), Allow: []string{"CI_JOB_TOKEN"}})
	for _, name := range []string{"OPENAI_API_KEY", "openai_api_key", "GITHUB_TOKEN", "AWS_REGION", "MY_SECRET", "DB_PASSWORD", "SSH_AUTH_SOCK", "STRIPE_SECRET_KEY", "NPM_TOKEN"} {
		if !s.blocked(name) {
			t.Errorf("%s not blocked", name)
		}
	}
	for _, name := range []string{"PATH", "HOME", "GOFLAGS", "TOKENIZERS_PARALLELISM", "CI_JOB_TOKEN", "TERM", "LANG", "GOPATH"} {
		if s.blocked(name) {
			t.Errorf("%s blocked", name)
		}
	}
	env, secrets := s.baseEnv([]string{"PATH=/bin", "MY_TOKEN=abcdefgh123", "SHORT_TOKEN=1", "=weird", "noequals"},
		map[string]string{"EXTRA": "1", "SET_TOKEN": "operator-set-secret"}, 8)
	joined := strings.Join(env, "\n")
	if strings.Contains(joined, "MY_TOKEN") || strings.Contains(joined, "SHORT_TOKEN") || !strings.Contains(joined, "PATH=/bin") || !strings.Contains(joined, "EXTRA=1") {
		t.Errorf("env %q", env)
	}
	if strings.Join(secrets, ",") != "abcdefgh123,operator-set-secret" {
		t.Errorf("collected secrets %q", secrets)
	}
}
