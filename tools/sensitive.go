package tools

import (
	"fmt"
	"path"
	"strings"
)

// sensitivePatterns are the names of files whose content is a secret as a
// whole (seed L12527-12543): keys, certificates with private parts,
// credential stores and .env files. Each is matched case-insensitively with
// path.Match against the file's base name, or against its last two
// elements when the pattern has a slash.
var sensitivePatterns = []string{
	".env", ".env.*", "*.env",
	"*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
	"*credentials*", "*secrets*", "*secret.*",
	"id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
	".ssh/*", ".aws/*", ".gnupg/*",
	".npmrc", ".pypirc", ".netrc", ".htpasswd", ".pgpass", ".git-credentials",
}

// SensitiveFile reports whether the file at p (slash-separated, relative or
// absolute) is one whose content must never be indexed or shown: only its
// existence may be. The rule that matched is returned for the record.
func SensitiveFile(p string) (rule string, ok bool) {
	p = strings.ToLower(p)
	base := path.Base(p)
	last2 := path.Join(path.Base(path.Dir(p)), base)
	for _, pat := range sensitivePatterns {
		name := base
		if strings.Contains(pat, "/") {
			name = last2
		}
		if m, _ := path.Match(pat, name); m {
			return pat, true
		}
	}
	return "", false
}

// SensitiveStub is what the file tools show instead of a sensitive file's
// content (seed L12553-12709): its name, that it is not shown, and its type.
func SensitiveStub(p, rule string) string {
	ext := path.Ext(p)
	if ext == "" {
		ext = "(none)"
	}
	return fmt.Sprintf("# %s\n(contents not shown for security: the file matches %q, a kind that holds secrets)\n\nFile type: %s\n", path.Base(p), rule, ext)
}
