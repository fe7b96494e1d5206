package natslog

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"demosvc/eventlog/eventlogtest"
)

// testCA signs route certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// files writes a certificate ca signs for node (127.0.0.1, server and
// client use), its key, and the certificate of trust, the CA it checks
// peers against, into dir, and returns their paths.
func (ca *testCA) files(t *testing.T, dir, node string, trust *testCA) (cert, key, caFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: node},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, caFile = filepath.Join(dir, node+".crt"), filepath.Join(dir, node+".key"), filepath.Join(dir, node+"-ca.crt")
	for path, data := range map[string][]byte{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		caFile: trust.pem,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, caFile
}

// logLines keeps what a server logs at warning and above.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		l.mu.Lock()
		l.lines = append(l.lines, r.Message)
		l.mu.Unlock()
	}
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }
func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// With cluster.tls_*, routes are mutual TLS: two nodes with certificates
// of the same CA form a cluster over TLS, and a node whose certificate
// another CA signed is refused.
func TestRoutesUseMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "demosvc test CA"), newTestCA(t, "another CA")
	addrs := eventlogtest.FreeAddrs(t, 3)
	pa, pb, pc := addrs[0], addrs[1], addrs[2]
	start := func(node, listen string, routes []string, signer *testCA, logs *logLines) *server.Server {
		t.Helper()
		cert, key, caFile := signer.files(t, dir, node, ca)
		rt, err := RouteTLS(cert, key, caFile)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := StartServer(ServerConfig{Cluster: "t", Node: node, Listen: listen, Routes: routes, RoutePassword: "route-secret",
			DataDir: filepath.Join(dir, node), RouteTLS: rt, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return srv
	}
	var quiet, refused logLines // a and b's, c's
	a := start("a", pa, []string{pb}, ca, &quiet)
	b := start("b", pb, []string{pa}, ca, &quiet)
	waitUntil(t, 30*time.Second, "a route between a and b", func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 })

	// a's route listener speaks TLS first, with a certificate of the CA
	// for 127.0.0.1, and asks for the peer's.
	cert, key, caFile := ca.files(t, dir, "probe", ca)
	probe, err := RouteTLS(cert, key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	probe.ServerName = "127.0.0.1"
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", pa, probe)
	if err != nil {
		t.Fatalf("a TLS handshake with a's route listener: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	info, err := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("a's route listener says %q (%v), want TLS required", info, err)
	}

	// c trusts a's certificate, but its own chains to another CA: a
	// refuses it.
	c := start("c", pc, []string{pa}, other, &refused)
	waitUntil(t, 30*time.Second, "c's route refused by a", func() bool { return quiet.has("TLS route handshake error") })
	if n := c.NumRoutes(); n != 0 {
		t.Errorf("c has %d routes with a certificate of another CA", n)
	}
}

// With cluster.nats_url, the same three files make the connection to the
// external NATS servers mutual TLS: a node with a certificate of the CA
// connects and sets the stream up; one without, or with a certificate of
// another CA, is refused.
func TestExternalNATSWithMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "demosvc test CA"), newTestCA(t, "another CA")
	cert, key, caFile := ca.files(t, dir, "nats", ca)
	srvTLS, err := RouteTLS(cert, key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "js"), TLS: true, TLSVerify: true, TLSConfig: srvTLS, TLSTimeout: 5, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := "tls://" + srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(tlsCfg *tls.Config) error {
		n, err := Open(ctx, Config{NATSURL: url, TLS: tlsCfg, Replicas: 1, LeaseTTL: time.Second})
		if err == nil {
			n.Close()
		}
		return err
	}
	cert, key, caFile = ca.files(t, dir, "n1", ca)
	good, err := RouteTLS(cert, key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := open(good); err != nil {
		t.Fatalf("a node with a certificate of the CA: %v", err)
	}
	cert, key, caFile = other.files(t, dir, "n2", ca)
	wrong, err := RouteTLS(cert, key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := open(wrong); err == nil {
		t.Error("a node with a certificate of another CA connected")
	}
	if err := open(nil); err == nil {
		t.Error("a node without TLS connected")
	}
}
