package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writeCert makes a self-signed certificate for 127.0.0.1 with the given
// serial and writes it and its key as PEM. It is good for server and
// client use, and as its own CA: the nodes of a test cluster share one.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	return writeCertValid(t, certFile, keyFile, serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// writeCertValid is writeCert valid from notBefore to notAfter.
func writeCertValid(t *testing.T, certFile, keyFile string, serial int64, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "demosvc test"},
		NotBefore: notBefore, NotAfter: notAfter,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestServeAnswersHTTPSAndReloadsTheCertificateOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := writeCert(t, certFile, keyFile, 1)
	env := map[string]string{
		"DEMOSVC_DATA_DIR": filepath.Join(dir, "data"), "DEMOSVC_LISTEN": "127.0.0.1:0",
		"DEMOSVC_TLS_CERT_FILE": certFile, "DEMOSVC_TLS_KEY_FILE": keyFile,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	stdout := &syncBuffer{}
	go func() {
		done <- run(ctx, []string{"demosvc", "serve"}, func(k string) string { return env[k] }, nil, stdout, io.Discard)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("serve did not stop")
		}
	}()

	// serve.json names the address once it listens.
	var info serveInfo
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling interval
		b, err := os.ReadFile(filepath.Join(dir, "data", serveInfoFile))
		if err == nil && json.Unmarshal(b, &info) == nil && info.Listen != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve never wrote serve.json")
		}
	}
	// served makes one connection, checks that the certificate it got is valid for the
	// address it was dialled at, and asks /healthz over that same connection, so a reload
	// between two connections cannot mix up two certificates.
	served := func() (*x509.Certificate, int) {
		t.Helper()
		conn, err := tls.Dial("tcp", info.Listen, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		defer conn.Close()
		cert := conn.ConnectionState().PeerCertificates[0]
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		host, _, _ := net.SplitHostPort(info.Listen)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Fatalf("served certificate does not verify for %s: %v", host, err)
		}
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+info.Listen+"\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatalf("GET /healthz over HTTPS: %v", err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET /healthz over HTTPS: %v", err)
		}
		resp.Body.Close()
		return cert, resp.StatusCode
	}
	if cert, code := served(); cert.SerialNumber.Cmp(first.SerialNumber) != 0 || code != 200 {
		t.Fatalf("served serial %v (status %d), want %v and 200", cert.SerialNumber, code, first.SerialNumber)
	}
	if resp, err := http.Get("http://" + info.Listen + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP was answered on the TLS address")
	}
	// The first start prints the dashboard's setup link, to HTTPS.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stdout.String(), "\nhttps://"+info.Listen+"/"); time.Sleep(10 * time.Millisecond) { // polling interval
		if strings.Contains(stdout.String(), "\nhttp://") || time.Now().After(deadline) {
			t.Fatalf("no setup link to https://%s/…; serve printed:\n%s", info.Listen, stdout)
		}
	}

	second := writeCert(t, certFile, keyFile, 2)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling interval
		cert, _ := served()
		if cert.SerialNumber.Cmp(second.SerialNumber) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was never served after SIGHUP")
		}
	}
}

func TestServeRefusesToStartWithoutItsCertificate(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{
		"DEMOSVC_DATA_DIR": filepath.Join(dir, "data"), "DEMOSVC_LISTEN": "127.0.0.1:0",
		"DEMOSVC_TLS_CERT_FILE": filepath.Join(dir, "missing.pem"), "DEMOSVC_TLS_KEY_FILE": filepath.Join(dir, "missing.key"),
	}
	var stderr strings.Builder
	code := run(context.Background(), []string{"demosvc", "serve"}, func(k string) string { return env[k] }, nil, io.Discard, &stderr)
	if code != exitFail || !strings.Contains(stderr.String(), "missing.pem") {
		t.Errorf("serve with a missing certificate = exit %d, %q; want exit 1 naming the file", code, stderr.String())
	}
}

// systemctl reload sends SIGHUP whether or not TLS is on: without a
// certificate to reload, serve says so and goes on serving, where the
// signal's default would end it without a shutdown.
func TestServeWithoutTLSGoesOnServingAfterSIGHUP(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"DEMOSVC_DATA_DIR": dir, "DEMOSVC_LISTEN": "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demosvc", "serve"}, func(k string) string { return env[k] }, nil, io.Discard, stderr)
	}()
	// stopServe stops the server once, and its exit code; a Fatal below
	// does not leave it serving for the rest of the package's tests.
	var stopOnce sync.Once
	var serveCode int
	stopServe := func() int { stopOnce.Do(func() { cancel(); serveCode = <-done }); return serveCode }
	t.Cleanup(func() { stopServe() })
	url := ""
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling interval
		var ok bool
		if url, ok = serverReady(dir); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve not ready after a minute")
		}
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "SIGHUP: nothing to reload"); time.Sleep(10 * time.Millisecond) { // polling interval
		if time.Now().After(deadline) {
			t.Fatalf("serve never logged the SIGHUP; it logged:\n%s", stderr)
		}
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after SIGHUP /healthz answered %d", resp.StatusCode)
	}
	if code := stopServe(); code != exitOK {
		t.Fatalf("serve exited %d after its shutdown; it logged:\n%s", code, stderr)
	}
}

// A certificate that is not valid now is refused at start and on reload,
// and a reload that meets one keeps serving the one before.
func TestACertificateNotValidNowIsNotServed(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	expired := func(serial int64) {
		writeCertValid(t, certFile, keyFile, serial, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	}
	expired(1)
	if _, err := loadCertificate(certFile, keyFile); err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Errorf("an expired certificate at start: %v, want it refused as expired", err)
	}
	writeCertValid(t, certFile, keyFile, 2, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	if _, err := loadCertificate(certFile, keyFile); err == nil || !strings.Contains(err.Error(), "not valid before") {
		t.Errorf("a certificate not yet valid at start: %v, want it refused", err)
	}

	writeCert(t, certFile, keyFile, 3)
	c, err := loadCertificate(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	expired(4)
	if err := c.reload(); err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Errorf("reloading an expired certificate: %v, want it refused", err)
	}
	if got := c.current.Load().Leaf.SerialNumber.Int64(); got != 3 {
		t.Errorf("serving serial %d after a refused reload, want 3 still", got)
	}
	writeCert(t, certFile, keyFile, 5)
	if err := c.reload(); err != nil || c.current.Load().Leaf.SerialNumber.Int64() != 5 {
		t.Errorf("reloading a valid certificate: %v, serial %d; want 5", err, c.current.Load().Leaf.SerialNumber.Int64())
	}
}
