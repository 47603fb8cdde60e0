package tools

import "testing"

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
