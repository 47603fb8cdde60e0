package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// InfoFile is the name of the file, in the data directory, that tells clients how
// to reach the running server.
const InfoFile = "server.json"

// ErrNoServer means no live server owns the data directory.
var ErrNoServer = errors.New("no sylk server is running")

// Info is the content of server.json.
type Info struct {
	URL      string `json:"url"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
	Creds    string `json:"creds,omitempty"`
	// TLSCA is the certificate to trust: the server's self-signed one.
	TLSCA          string `json:"tls_ca,omitempty"`
	TLSFingerprint string `json:"tls_fingerprint,omitempty"`
	// HTTP is the server's HTTP listener (metrics), when it has one.
	HTTP      string    `json:"http,omitempty"`
	PID       int       `json:"pid"`
	DataDir   string    `json:"data_dir"`
	StartedAt time.Time `json:"started_at"`
}

func writeInfo(dataDir string, info Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, InfoFile+".tmp")
	// 0600: the file may hold credentials.
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dataDir, InfoFile))
}

// ReadInfo returns the server.json of the live server that owns dataDir. It
// returns ErrNoServer when there is none, and also when server.json was left
// behind by a server that crashed (stale: nobody holds the data directory's lock).
func ReadInfo(dataDir string) (Info, error) {
	var info Info
	b, err := os.ReadFile(filepath.Join(dataDir, InfoFile))
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("%w on %s", ErrNoServer, dataDir)
	}
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", filepath.Join(dataDir, InfoFile), err)
	}
	held, err := lockHeld(dataDir)
	if err != nil {
		return info, err
	}
	if !held {
		return info, fmt.Errorf("%w on %s (server.json of pid %d is stale: that server is gone)", ErrNoServer, dataDir, info.PID)
	}
	return info, nil
}
