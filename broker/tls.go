package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TLSDir holds the self-signed certificate of --tls-self-signed.
const TLSDir = "tls"

// Loopback reports whether host (of a listen address) is reachable from
// this machine only.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validateTLS refuses a listener other machines can reach without TLS,
// unless the user said --insecure.
func (o *Options) validateTLS() error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together: give both files", ErrInvalidOptions)
	}
	if o.TLSCert != "" && o.TLSSelfSigned {
		return fmt.Errorf("%w: --tls-self-signed generates a certificate; it does not go with --tls-cert", ErrInvalidOptions)
	}
	if o.Listen == ListenNone || o.TLSCert != "" || o.TLSSelfSigned || o.Insecure {
		return nil
	}
	if host, _, _ := splitListen(o.Listen); !Loopback(host) {
		return fmt.Errorf("%w: --listen %q is reachable from other machines, and without TLS credentials and events would cross the network in clear text: "+
			"give --tls-cert FILE --tls-key FILE, or --tls-self-signed (a certificate generated in %s, its fingerprint printed), or --insecure to accept clear text",
			ErrInvalidOptions, o.Listen, filepath.Join(o.DataDir, TLSDir))
	}
	return nil
}

// withTLS turns TLS on for the embedded server's listener: the given
// certificate, or a self-signed one kept in <data>/tls.
func (b *Broker) withTLS(sopts *server.Options) error {
	o := &b.opts
	if o.TLSSelfSigned {
		cert, key, fp, err := selfSigned(filepath.Join(o.DataDir, TLSDir), sopts.Host)
		if err != nil {
			return fmt.Errorf("self-signed certificate: %w", err)
		}
		o.TLSCert, o.TLSKey, b.tlsCA, b.tlsFingerprint = cert, key, cert, fp
	}
	if o.TLSCert == "" {
		return nil
	}
	cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey})
	if err != nil {
		return fmt.Errorf("%w: --tls-cert %s --tls-key %s: %w", ErrInvalidOptions, o.TLSCert, o.TLSKey, err)
	}
	if b.tlsFingerprint == "" && len(cfg.Certificates) > 0 {
		b.tlsFingerprint = Fingerprint(cfg.Certificates[0].Certificate[0])
	}
	sopts.TLSConfig, sopts.TLS, sopts.TLSTimeout = cfg, true, 2
	return nil
}

// Fingerprint is the SHA-256 fingerprint of a DER certificate, as
// `openssl x509 -fingerprint -sha256` prints it.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var parts []string
	for i := 0; i < len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, ":")
}

// selfSigned returns the certificate and key files in dir, creating them the
// first time (ECDSA P-256, ten years, for host, localhost, 127.0.0.1 and this
// machine's name), and the certificate's fingerprint.
func selfSigned(dir, host string) (certFile, keyFile, fingerprint string, err error) {
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if b, err := os.ReadFile(certFile); err == nil {
		blk, _ := pem.Decode(b)
		if blk == nil {
			return "", "", "", fmt.Errorf("%s: not a PEM certificate (remove it to generate a new one)", certFile)
		}
		return certFile, keyFile, Fingerprint(blk.Bytes), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "sylk"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if name, err := os.Hostname(); err == nil {
		tmpl.DNSNames = append(tmpl.DNSNames, name)
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "" && ip == nil {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	if err := writeSecret(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})); err != nil {
		return "", "", "", err
	}
	if err := writeSecret(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return "", "", "", err
	}
	return certFile, keyFile, Fingerprint(der), nil
}
