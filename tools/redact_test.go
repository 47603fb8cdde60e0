package tools

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func newTestRedactor(t testing.TB, values ...string) *Redactor {
	t.Helper()
	r, err := NewRedactor(SecretOptions{Values: values})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Secrets used in tests. They are built by concatenation so that this file
// holds no literal credential shapes for scanners to trip over.
var (
	openAIKey    = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n"
	anthropicKey = "sk-" + "ant-api03-" + strings.Repeat("Zx9_Yw8-", 12)
	githubPAT    = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
	githubFine   = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
	awsKeyID     = "AKIA" + "IOSFODNN7EXAMPLE"
	awsSecret    = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
	slackToken   = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	googleKey    = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	jwt          = "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	pemBody      = "MIIEowIBAAKCAQEA7bq2hG5kX9Ty1s0Vd3vJwQ4Z\nq8d3F0b9S2mKkPq1Yc8fQ3Vb7Wn5Z2xT1uR4eS9y\nYk3cF7gH1jK5lM9nP2qR4sT6uV8wX0yZ2aB4cD6e==\n"
	privateKey   = "-----BEGIN RSA " + "PRIVATE KEY-----\n" + pemBody + "-----END RSA " + "PRIVATE KEY-----"
)

func TestRedactShapes(t *testing.T) {
	r := newTestRedactor(t, "correct-horse-battery")
	const R = DefaultRedaction
	for _, tc := range []struct{ in, want string }{
		{"key: " + openAIKey, "key: " + R},
		{"export ANTHROPIC_API_KEY=" + anthropicKey, "export ANTHROPIC_API_KEY=" + R},
		{"token " + githubPAT + " used", "token " + R + " used"},
		{githubFine, R},
		{"aws_access_key_id = " + awsKeyID, "aws_access_key_id = " + R},
		{"AWS_SECRET_ACCESS_KEY=" + awsSecret, "AWS_SECRET_ACCESS_KEY=" + R},
		{"slack: " + slackToken, "slack: " + R},
		{"google " + googleKey, "google " + R},
		{"auth " + jwt + " end", "auth " + R + " end"},
		{"Authorization: Bearer abc.def-ghi_jkl123", "Authorization: Bearer " + R},
		{`curl -H "Authorization: Basic dXNlcjpwYXNzd29yZA=="`, `curl -H "Authorization: Basic ` + R + `"`},
		{"bearer   0123456789abcdef", "bearer   " + R},
		{"postgres://admin:hunter2@db.example.com:5432/app", "postgres://admin:" + R + "@db.example.com:5432/app"},
		{"https://user:p%40ss@example.com/", "https://user:" + R + "@example.com/"},
		{"before\n" + privateKey + "\nafter", "before\n" + R + "\n\n\n\n\nafter"}, // line count kept
		{`{"password": "s3cr3t-pw", "user": "bob"}`, `{"password": "` + R + `", "user": "bob"}`},
		{"DB_PASSWORD=hunter22", "DB_PASSWORD=" + R},
		{"password: hunter22", "password: " + R},
		{"client_secret='abcdefgh12345678'", "client_secret='" + R + "'"},
		{"https://api.example.com/x?access_token=abc123def456&page=2", "https://api.example.com/x?access_token=" + R + "&page=2"},
		{"my password is correct-horse-battery!", "my password is " + R + "!"},
		// Each word is looked at, the one right after a secret too.
		{githubPAT + " " + githubPAT, R + " " + R},
		{"auth " + jwt + " Bearer 0123456789abcdef", "auth " + R + " Bearer " + R},
		// A password key that is not a Go test's verdict.
		{"PASS: hunter22", "PASS: " + R},
		{"db pass: hunter22", "db pass: " + R},
		{"PASS=hunter22", "PASS=" + R},
		{"--- PASS: TestLoad (0.00s)\npassword: hunter22", "--- PASS: TestLoad (0.00s)\npassword: " + R},
		// Not secrets.
		{"task-1234567890abcdefghij", "task-1234567890abcdefghij"},
		{"x" + githubPAT, "x" + githubPAT}, // inside a word
		// Go test verdicts: the test's name is no password.
		{"=== RUN   TestLoad\n--- PASS: TestLoad (0.00s)\nPASS", "=== RUN   TestLoad\n--- PASS: TestLoad (0.00s)\nPASS"},
		{"    --- PASS: TestLoad/empty_key (0.00s)", "    --- PASS: TestLoad/empty_key (0.00s)"},
		{`{"Action":"output","Test":"TestLoad","Output":"--- PASS: TestLoad (0.01s)\n"}`, `{"Action":"output","Test":"TestLoad","Output":"--- PASS: TestLoad (0.01s)\n"}`},
		{"sk-learn is a library", "sk-learn is a library"},
		{"max_tokens: 2000", "max_tokens: 2000"},
		{"if password == \"\" {", "if password == \"\" {"},
		{"password := r.FormValue(\"password\")", "password := r.FormValue(\"password\")"},
		{"secret := cfg.Secret", "secret := cfg.Secret"},
		{"token = nextToken", "token = nextToken"},
		{"password: ${DB_PASSWORD}", "password: ${DB_PASSWORD}"},
		{"api_key: <your key here>", "api_key: <your key here>"},
		{"https://example.com:8080/path", "https://example.com:8080/path"},
		{"Password string `json:\"password\"`", "Password string `json:\"password\"`"},
		{"time=12:30:45 level=info msg=started", "time=12:30:45 level=info msg=started"},
		{"-----BEGIN PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----"},
		{`const header = "-----BEGIN RSA ` + `PRIVATE KEY-----"`, `const header = "-----BEGIN RSA ` + `PRIVATE KEY-----"`},
	} {
		if got := r.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// Truncated output may keep only one end of a PEM block; its body must go
// either way.
func TestRedactPartialPrivateKey(t *testing.T) {
	r := newTestRedactor(t)
	begin := "log line\n-----BEGIN OPENSSH " + "PRIVATE KEY-----\n" + pemBody + "[... 3 lines omitted ...]\nmore log\n"
	end := "[... 30 lines omitted ...]\n" + pemBody + "-----END OPENSSH " + "PRIVATE KEY-----\nnext\n"
	oneLine := `{"key": "-----BEGIN ` + `PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END ` + `PRIVATE KEY-----\n", "n": 1}`
	for _, in := range []string{begin, end, oneLine} {
		got := r.Redact(in)
		if strings.Contains(got, "MIIE") || strings.Contains(got, "Yk3cF7gH1jK5") {
			t.Errorf("key body survived:\n%s", got)
		}
		if !strings.Contains(got, DefaultRedaction) {
			t.Errorf("nothing redacted:\n%s", got)
		}
	}
	if got := r.Redact(begin); !strings.Contains(got, "log line") || !strings.Contains(got, "more log") {
		t.Errorf("redaction took surrounding lines:\n%s", got)
	}
}

// Redacting twice changes nothing more; text without secrets is untouched.
func TestRedactIdempotentAndIdentity(t *testing.T) {
	r := newTestRedactor(t, "literal-secret-value")
	in := "x " + openAIKey + " password=hunter22 " + jwt + " literal-secret-value postgres://a:b@c/ " + privateKey
	once := r.Redact(in)
	if twice := r.Redact(once); twice != once {
		t.Errorf("not idempotent:\n once %q\ntwice %q", once, twice)
	}
	plain := "func main() {\n\tfmt.Println(\"hello: world\", a == b, x := 3)\n}\n"
	if got := r.Redact(plain); got != plain {
		t.Errorf("plain text changed: %q", got)
	}
}

func TestNewRedactorRejectsBadConfig(t *testing.T) {
	if _, err := NewRedactor(SecretOptions{Values: []string{"ab"}}); err == nil {
		t.Error("a 2-byte secret value was accepted")
	}
	if _, err := NewRedactor(SecretOptions{Patterns: []string{"("}}); err == nil {
		t.Error("an invalid pattern was accepted")
	}
	r, err := NewRedactor(SecretOptions{Patterns: []string{`internal-[0-9]{4}`}, Replacement: "***"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Redact("id internal-1234 ok"); got != "id *** ok" {
		t.Errorf("custom pattern: %q", got)
	}
}

// A planted secret never survives, wherever it sits in random text.
func FuzzRedactPlanted(f *testing.F) {
	f.Add("some log output\nwith lines: and = signs", uint16(5), uint8(0))
	f.Add("", uint16(0), uint8(1))
	f.Add("password=", uint16(9), uint8(2))
	f.Add("https://user:@", uint16(13), uint8(3))
	secrets := []string{"literal-secret-value", openAIKey, githubPAT, awsKeyID, jwt, slackToken}
	r := newTestRedactor(f, "literal-secret-value")
	f.Fuzz(func(t *testing.T, text string, at uint16, which uint8) {
		s := secrets[int(which)%len(secrets)]
		pos := int(at) % (len(text) + 1)
		// Keep the secret a token of its own, as it would be in output.
		in := text[:pos] + " " + s + " " + text[pos:]
		got := r.Redact(in)
		if strings.Contains(got, s) {
			t.Fatalf("secret %q survived in %q", s, got)
		}
		if again := r.Redact(got); again != got {
			t.Fatalf("not idempotent: %q -> %q", got, again)
		}
	})
}

// redactionCorpus is about 1 MB of realistic tool output with a few secrets.
func redactionCorpus() string {
	rng := rand.New(rand.NewPCG(1, 2))
	lines := []string{
		"ok  \tgithub.com/sylk/sylk/events\t0.412s\tcoverage: 81.2% of statements",
		"--- FAIL: TestAppendBatch (0.03s)",
		"    append_test.go:88: got seq 12, want 13",
		"2025-01-02T15:04:05.000Z level=info msg=\"consumer started\" durable=agent-engineer pending=0",
		"\tfmt.Fprintf(w, \"%s: %d\\n\", name, count) // print the counts",
		"func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {",
		"diff --git a/tools/exec.go b/tools/exec.go",
		"+\tif err := cmd.Start(); err != nil {",
		"npm WARN deprecated request@2.88.2: request has been deprecated",
		"    at Module._compile (node:internal/modules/cjs/loader:1105:14)",
		"Compiling sylk v0.1.0 (/home/dev/sylk)",
		"config: timeout=30s retries=3 url=https://api.example.com/v1",
	}
	var b strings.Builder
	for b.Len() < 1<<20 {
		if rng.IntN(2000) == 0 {
			b.WriteString("export OPENAI_API_KEY=" + openAIKey + "\n")
		}
		b.WriteString(lines[rng.IntN(len(lines))])
		b.WriteByte('\n')
	}
	return b.String()
}

func BenchmarkRedact1MB(b *testing.B) {
	r := newTestRedactor(b, "literal-secret-value", "another-configured-secret", "0123456789abcdef")
	in := redactionCorpus()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out := r.Redact(in)
		if strings.Contains(out, openAIKey) {
			b.Fatal("secret survived")
		}
	}
}

// Find names each secret once, by kind, with its surroundings masked; text
// without secrets has no findings.
func TestRedactorFind(t *testing.T) {
	r, err := NewRedactor(SecretOptions{Values: []string{"hunter2-configured"}})
	if err != nil {
		t.Fatal(err)
	}
	text := "use ghp_" + strings.Repeat("a", 36) + " then password=hunter2-configured and done"
	got := r.Find(text)
	want := []Finding{
		{Pattern: "credential_token", Context: "use [***] then password="},
		{Pattern: "configured_secret", Context: " then password=[***] and done"},
	}
	if len(got) != len(want) {
		t.Fatalf("findings %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("finding %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if f := r.Find("go test ./... passed in 3s"); len(f) != 0 {
		t.Fatalf("findings in plain text: %+v", f)
	}
}
