package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// AuthDir is the directory, in the data directory, holding the server's keys
// and the credentials it issued. Everything in it is 0600 (the directory 0700).
const AuthDir = "auth"

// AdminUser is the name of the credential the server and the CLI use.
const AdminUser = "admin"

// Sentinel errors of credential management.
var (
	ErrNoUser      = errors.New("no such user")
	ErrUserExists  = errors.New("user already exists")
	ErrBadCreds    = errors.New("malformed credentials file")
	ErrAuthMissing = errors.New("no credentials")
)

// Auth holds a data directory's NATS decentralized-auth material: an operator,
// the system account (for claim updates), the SYLK account every client logs
// into, and the users issued in it. The first start on a data directory
// creates it; later ones load it.
//
//	auth/operator.nk, operator.jwt    the operator: trusts the two accounts
//	auth/sys.nk, sys.jwt, sys.creds   the system account and its user
//	auth/account.nk, account.jwt      the SYLK account, with its revocations
//	auth/users/<name>.creds           one .creds file per issued user
type Auth struct {
	dir      string
	operator nkeys.KeyPair
	account  nkeys.KeyPair
	opJWT    string
	sysJWT   string
	accJWT   string
	sysPub   string
	accPub   string
}

// LoadAuth loads the auth material of dataDir, creating it the first time.
func LoadAuth(dataDir string) (*Auth, error) {
	a := &Auth{dir: filepath.Join(dataDir, AuthDir)}
	if err := os.MkdirAll(filepath.Join(a.dir, "users"), 0o700); err != nil {
		return nil, err
	}
	var err error
	if a.operator, err = a.key("operator", nkeys.CreateOperator); err != nil {
		return nil, err
	}
	sys, err := a.key("sys", nkeys.CreateAccount)
	if err != nil {
		return nil, err
	}
	if a.account, err = a.key("account", nkeys.CreateAccount); err != nil {
		return nil, err
	}
	a.sysPub, _ = sys.PublicKey()
	a.accPub, _ = a.account.PublicKey()
	opPub, _ := a.operator.PublicKey()

	if a.opJWT, err = a.claim("operator", func() (string, error) {
		oc := jwt.NewOperatorClaims(opPub)
		oc.Name = "sylk"
		oc.SystemAccount = a.sysPub
		return oc.Encode(a.operator)
	}); err != nil {
		return nil, err
	}
	if a.sysJWT, err = a.claim("sys", func() (string, error) {
		ac := jwt.NewAccountClaims(a.sysPub)
		ac.Name = "SYS"
		return ac.Encode(a.operator)
	}); err != nil {
		return nil, err
	}
	if a.accJWT, err = a.claim("account", func() (string, error) {
		ac := jwt.NewAccountClaims(a.accPub)
		ac.Name = "SYLK"
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1}
		return ac.Encode(a.operator)
	}); err != nil {
		return nil, err
	}
	if _, err := os.Stat(a.sysCredsPath()); errors.Is(err, fs.ErrNotExist) {
		creds, _, err := issue(sys, "sys", nil, jwt.Permissions{})
		if err != nil {
			return nil, err
		}
		if err := writeSecret(a.sysCredsPath(), creds); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(a.CredsPath(AdminUser)); errors.Is(err, fs.ErrNotExist) {
		if _, err := a.AddUser(AdminUser, Role{Kind: RoleAdmin}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// key loads auth/<name>.nk or creates it.
func (a *Auth) key(name string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, error) {
	path := filepath.Join(a.dir, name+".nk")
	b, err := os.ReadFile(path)
	if err == nil {
		kp, err := nkeys.FromSeed(bytes.TrimSpace(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return kp, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	kp, err := create()
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	return kp, writeSecret(path, append(seed, '\n'))
}

// claim loads auth/<name>.jwt or creates it with mint.
func (a *Auth) claim(name string, mint func() (string, error)) (string, error) {
	path := filepath.Join(a.dir, name+".jwt")
	b, err := os.ReadFile(path)
	if err == nil {
		return string(bytes.TrimSpace(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	s, err := mint()
	if err != nil {
		return "", err
	}
	return s, writeSecret(path, []byte(s+"\n"))
}

// writeSecret writes a file only its owner can read, atomically.
func writeSecret(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (a *Auth) sysCredsPath() string { return filepath.Join(a.dir, "sys.creds") }

// CredsPath is where the .creds file of user name is.
func (a *Auth) CredsPath(name string) string { return filepath.Join(a.dir, "users", name+".creds") }

// AccountPublicKey is the SYLK account's public key; its streams are stored
// under jetstream/<key>.
func (a *Auth) AccountPublicKey() string { return a.accPub }

// issue makes a user of the account signed by signer, returning its .creds.
func issue(signer nkeys.KeyPair, name string, tags []string, perms jwt.Permissions) ([]byte, string, error) {
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", err
	}
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	uc.Permissions = perms
	uc.Tags.Add(tags...)
	tok, err := uc.Encode(signer)
	if err != nil {
		return nil, "", err
	}
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(tok, seed)
	return creds, upub, err
}

// AddUser issues a credential named name with role r and writes it to
// CredsPath(name) (0600). A name in use by a live user is refused; a revoked
// one may be issued again.
func (a *Auth) AddUser(name string, r Role) (User, error) {
	if !consumerName.MatchString(name) {
		return User{}, fmt.Errorf("%w: user name %q: use 1 to 64 of [A-Za-z0-9_-]", ErrInvalidRole, name)
	}
	if u, err := a.User(name); err == nil && !u.Revoked {
		return User{}, fmt.Errorf("%w: %q (%s); revoke it first to issue a new one", ErrUserExists, name, u.Role)
	}
	creds, _, err := issue(a.account, name, []string{"role:" + r.String()}, r.Permissions())
	if err != nil {
		return User{}, err
	}
	if err := writeSecret(a.CredsPath(name), creds); err != nil {
		return User{}, err
	}
	return a.User(name)
}

// User is an issued credential.
type User struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	PublicKey string    `json:"public_key"`
	Issued    time.Time `json:"issued"`
	Revoked   bool      `json:"revoked"`
	Creds     string    `json:"creds"`
}

// ReadCreds parses a .creds file, saying what is wrong with a bad one.
func ReadCreds(path string) (*jwt.UserClaims, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: %s is empty (want the file `sylk user add` wrote)", ErrBadCreds, path)
	}
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil || !strings.Contains(string(b), "BEGIN NATS USER JWT") {
		return nil, fmt.Errorf("%w: %s: no NATS USER JWT block (want the file `sylk user add` wrote)", ErrBadCreds, path)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: the user JWT does not decode: %w", ErrBadCreds, path, err)
	}
	if _, err := jwt.ParseDecoratedUserNKey(b); err != nil {
		return nil, fmt.Errorf("%w: %s: no valid user seed: %w", ErrBadCreds, path, err)
	}
	return uc, nil
}

// User returns the issued user name.
func (a *Auth) User(name string) (User, error) {
	path := a.CredsPath(name)
	uc, err := ReadCreds(path)
	if errors.Is(err, fs.ErrNotExist) {
		return User{}, fmt.Errorf("%w: %q (see `sylk user ls`)", ErrNoUser, name)
	}
	if err != nil {
		return User{}, err
	}
	ac, err := jwt.DecodeAccountClaims(a.accJWT)
	if err != nil {
		return User{}, err
	}
	role := ""
	for _, t := range uc.Tags {
		if r, ok := strings.CutPrefix(t, "role:"); ok {
			role = r
		}
	}
	return User{
		Name: uc.Name, Role: role, PublicKey: uc.Subject, Issued: time.Unix(uc.IssuedAt, 0).UTC(),
		Revoked: ac.IsClaimRevoked(uc), Creds: path,
	}, nil
}

// Users lists the issued users by name.
func (a *Auth) Users() ([]User, error) {
	paths, err := filepath.Glob(filepath.Join(a.dir, "users", "*.creds"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []User
	for _, p := range paths {
		u, err := a.User(strings.TrimSuffix(filepath.Base(p), ".creds"))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Revoke revokes user name from now on: the account's revocation list gets its
// key, and the re-signed account JWT is written. It returns that JWT for
// PushAccount, which tells a running server (whose connections of that user
// are then closed). The admin credential cannot be revoked.
func (a *Auth) Revoke(name string) (string, error) {
	if name == AdminUser {
		return "", fmt.Errorf("%w: %q is the server's own credential and cannot be revoked", ErrInvalidRole, name)
	}
	u, err := a.User(name)
	if err != nil {
		return "", err
	}
	ac, err := jwt.DecodeAccountClaims(a.accJWT)
	if err != nil {
		return "", err
	}
	ac.Revoke(u.PublicKey)
	tok, err := ac.Encode(a.operator)
	if err != nil {
		return "", err
	}
	if err := writeSecret(filepath.Join(a.dir, "account.jwt"), []byte(tok+"\n")); err != nil {
		return "", err
	}
	a.accJWT = tok
	return tok, nil
}

// pushAccount hands the SYLK account's new JWT to the server behind nc (a
// system-account connection), which applies it at once: a revoked user's
// connections are closed.
func (a *Auth) pushAccount(ctx context.Context, nc *nats.Conn) error {
	resp, err := nc.RequestWithContext(ctx, fmt.Sprintf("$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE", a.accPub), []byte(a.accJWT))
	if err != nil {
		return fmt.Errorf("tell the server about the new account JWT: %w", err)
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err == nil && r.Error != nil {
		return fmt.Errorf("the server refused the new account JWT: %s", r.Error.Description)
	}
	return nil
}

// Revoke revokes user name on this embedded server and its data directory.
func (b *Broker) Revoke(ctx context.Context, name string) error {
	if b.auth == nil {
		return fmt.Errorf("%w: this server runs without authentication", ErrAuthMissing)
	}
	if _, err := b.auth.Revoke(name); err != nil {
		return err
	}
	nc, err := nats.Connect("", nats.InProcessServer(b.srv), nats.UserCredentials(b.auth.sysCredsPath()))
	if err != nil {
		return err
	}
	defer nc.Close()
	return b.auth.pushAccount(ctx, nc)
}

// RevokeUser revokes user name of the data directory, from another process
// than the server's: the revocation is written to <data>/auth, and the
// running server, if any, applies it at once.
func RevokeUser(ctx context.Context, dataDir, name string) error {
	a, err := LoadAuth(dataDir)
	if err != nil {
		return err
	}
	if _, err := a.Revoke(name); err != nil {
		return err
	}
	info, err := ReadInfo(dataDir)
	if errors.Is(err, ErrNoServer) {
		return nil // the next start loads it
	}
	if err != nil {
		return err
	}
	nc, err := nats.Connect(info.URL, authOptions(Options{CredsFile: a.sysCredsPath(), tlsCA: info.TLSCA})...)
	if err != nil {
		return fmt.Errorf("connect to %s as the system account: %w", info.URL, err)
	}
	defer nc.Close()
	return a.pushAccount(ctx, nc)
}
