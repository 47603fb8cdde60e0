package tools

import (
	"path"
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

// The rules taken apart once match exactly what path.Match over the
// patterns matches, on names built from the patterns' own pieces.
func TestSensitiveRulesMatchPathMatch(t *testing.T) {
	pieces := []string{"", ".", "env", ".env", "x", "pem", "key", "credentials", "secrets", "secret", "id_rsa", "ssh", ".ssh", ".aws", "npmrc", ".npmrc", "a.b"}
	var names []string
	for _, a := range pieces {
		for _, b := range pieces {
			for _, c := range pieces {
				names = append(names, a+b+c, a+"."+b+c, a+b+"."+c)
			}
		}
	}
	for _, dir := range []string{"", "home/.ssh/", ".aws/", "src/", ".gnupg/", "x/.ssh.d/"} {
		for _, n := range names {
			p := strings.ToLower(dir + n)
			base := path.Base(p)
			last2 := path.Join(path.Base(path.Dir(p)), base)
			want := ""
			for _, pat := range sensitivePatterns {
				name := base
				if strings.Contains(pat, "/") {
					name = last2
				}
				if m, _ := path.Match(pat, name); m {
					want = pat
					break
				}
			}
			if got, _ := SensitiveFile(dir + n); got != want {
				t.Fatalf("SensitiveFile(%q) matched %q, path.Match %q", dir+n, got, want)
			}
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
