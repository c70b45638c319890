package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// The agent's web configuration: the Prometheus exporters' file (TLS,
// basic authentication), loopback by default, and refused bad settings.

func TestAgentDefaultsToLoopback(t *testing.T) {
	out, _, code := run(t, "agent", "--help")
	if code != 0 || !strings.Contains(out, `--listen string`) || !strings.Contains(out, `"127.0.0.1:9847"`) {
		t.Errorf("agent --help (status %d) does not show the loopback default:\n%s", code, out)
	}
}

func TestAgentRefusesBadSettings(t *testing.T) {
	// Values it cannot use are usage (2); a device that does not answer is
	// a failure to do its work (3).
	for _, c := range []struct {
		args   []string
		want   string
		status int
	}{
		{[]string{"--window", "1s", "--interval", "1s"}, "a window of at least two intervals", 2},
		// Bare numbers are seconds, as for every gpufeed duration.
		{[]string{"--window", "1", "--interval", "1"}, "--interval 1s, --window 1s, --ring 10m0s: want", 2},
		{[]string{"--window", "abc"}, `--window wants a duration: seconds (30, 2.5) or with a unit (500ms, 30s, 2m); got "abc"`, 2},
		{[]string{"--ring", "NaN"}, `--ring wants a duration`, 2},
		{[]string{"--ring", "30s", "--window", "1m"}, "a ring of at least one window", 2},
		{[]string{"--web.config.file", "/nonexistent/web.yml"}, "--web.config.file /nonexistent/web.yml", 2},
		{[]string{"--device", "sim:" + filepath.Join(t.TempDir(), "none.sock")}, "none.sock", 3},
	} {
		_, stderr, code := run(t, append([]string{"agent", "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != c.status || !strings.Contains(stderr, c.want) {
			t.Errorf("agent %v: status %d, stderr %q; want %d and %q", c.args, code, stderr, c.status, c.want)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpufeed test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestAgentWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	conf := "tls_server_config:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\nbasic_auth_users:\n  scraper: " + string(hash) + "\n"
	if err := os.WriteFile(web, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgentProc(t, "node-tls", "--device", "none", "--web.config.file", web)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(scheme, user, pass string) (int, error) {
		req, _ := http.NewRequest("GET", scheme+"://"+a.addr+"/metrics", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("https", "scraper", "s3cret"); err != nil || code != http.StatusOK {
		t.Errorf("https with the password: %d %v, want 200", code, err)
	}
	if code, err := get("https", "scraper", "wrong"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("https with a wrong password: %d %v, want 401", code, err)
	}
	if code, err := get("https", "", ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("https without a password: %d %v, want 401", code, err)
	}
	if code, err := get("http", "scraper", "s3cret"); err == nil && code == http.StatusOK {
		t.Errorf("plain http served the metrics (status %d): TLS is not in force", code)
	}
}
