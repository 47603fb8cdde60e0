package tools

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSensitiveFile(t *testing.T) {
	for p, want := range map[string]bool{
		".env": true, "config/.env.production": true, "certs/server.pem": true, "tls.KEY": true,
		"home/.ssh/config": true, "deploy/aws_credentials.json": true, "k8s/secrets.yaml": true,
		"id_ed25519.pub": true, ".npmrc": true,
		"main.go": false, "env.go": false, "keys.go": false, "docs/ssh.md": false, "secretary.txt": false,
	} {
		if _, got := SensitiveFile(p); got != want {
			t.Errorf("SensitiveFile(%q) = %v, want %v", p, got, want)
		}
	}
}

// The file tools show a sensitive file's name and type, never its content:
// read_file answers with the stub, grep does not search it and says so.
func TestSensitiveFilesAreStubbed(t *testing.T) {
	e := newTestExecutor(t, nil)
	dir := e.WorkDir()
	writeFile(t, filepath.Join(dir, ".env"), "DB_PASSWORD=plainvalue42\nTODO=1\n")
	writeFile(t, filepath.Join(dir, "deploy/server.key"), "TODO not a real key\n")
	writeFile(t, filepath.Join(dir, "main.go"), "package main // TODO\n")

	r := mustRun(t, e, "librarian", ToolReadFile, map[string]any{"path": ".env"})
	if !r.OK || strings.Contains(r.Output, "plainvalue42") || !strings.Contains(r.Output, "# .env\n(contents not shown for security") ||
		!strings.Contains(r.Summary, "a sensitive file (.env)") || !decodeData[readData](t, r).Stubbed {
		t.Fatalf("read_file .env: %+v", r)
	}
	r = mustRun(t, e, "librarian", ToolReadFile, map[string]any{"path": "deploy/server.key"})
	if !strings.Contains(r.Output, "File type: .key") || strings.Contains(r.Output, "real key") {
		t.Fatalf("read_file server.key: %q", r.Output)
	}

	r = mustRun(t, e, "librarian", ToolGrep, map[string]any{"pattern": "TODO|plainvalue"})
	d := decodeData[grepData](t, r)
	if r.Output != "main.go:1: package main // TODO\n" || len(d.Sensitive) != 2 || !strings.Contains(r.Summary, "2 sensitive files not searched: .env, deploy/server.key") {
		t.Fatalf("grep: %q %q %+v", r.Output, r.Summary, d)
	}
}
