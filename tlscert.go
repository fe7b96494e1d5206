package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// certificate serves the TLS certificate of tls.cert_file and
// tls.key_file, and loads them again on SIGHUP, so that a renewed
// certificate is served without a restart. A reload that fails keeps the
// certificate in use and says why.
type certificate struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the pair once; serve refuses to start without it,
// or with a certificate that is not valid now.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the pair again and serves it, unless it cannot be read or
// its certificate is not valid now (expired, or not yet valid): a renewal
// that wrote an old certificate back must not replace a good one, and a
// start with one that clients would refuse says so rather than serving it.
func (c *certificate) reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls: loading %s and %s: %w", c.certFile, c.keyFile, err)
	}
	now := time.Now()
	switch leaf := pair.Leaf; {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("tls: the certificate in %s expired at %s", c.certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("tls: the certificate in %s is not valid before %s (is this machine's clock right?)", c.certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	c.current.Store(&pair)
	return nil
}

// notAfter is when the certificate served expires.
func (c *certificate) notAfter() time.Time { return c.current.Load().Leaf.NotAfter }

// tlsConfig is the server's TLS configuration: TLS 1.2 or later, the
// current certificate at every handshake.
func (c *certificate) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.current.Load(), nil
		},
	}
}

// onHangup answers every SIGHUP on hup until stop is closed: it reloads
// cert, or with TLS off (cert nil) says there is nothing to reload.
func onHangup(logger *slog.Logger, hup <-chan os.Signal, stop <-chan struct{}, cert *certificate) {
	for {
		select {
		case <-hup:
			if cert == nil {
				logger.Info("SIGHUP: nothing to reload, tls.cert_file is not set; still serving")
				continue
			}
			if err := cert.reload(); err != nil {
				logger.Error("TLS certificate not reloaded; still serving the previous one", "err", err)
				continue
			}
			logger.Info("TLS certificate reloaded", "cert_file", cert.certFile, "not_after", cert.notAfter().UTC().Format(time.RFC3339))
		case <-stop:
			return
		}
	}
}
