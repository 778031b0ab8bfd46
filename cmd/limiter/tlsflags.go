package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
)

// tlsFlags are the -tls-* options of check and bench: they set up TLS for a
// rediss:// URL (or a Cluster given with -cluster).
type tlsFlags struct {
	ca, cert, key string
	insecure      bool
	cluster       bool // -cluster: the options themselves turn TLS on
}

func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "", "PEM file of the CA that signed the server's certificate (default: the system's)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM file of a client certificate to present (with -tls-key)")
	fs.StringVar(&f.key, "tls-key", "", "PEM file of the client certificate's key")
	fs.BoolVar(&f.insecure, "tls-insecure", false, "do not verify the server's certificate (testing only)")
}

// set reports whether any -tls-* option was given.
func (f *tlsFlags) set() bool { return f.ca != "" || f.cert != "" || f.key != "" || f.insecure }

// config returns the TLS configuration: base (a rediss:// URL's) with the
// options applied. Without base, the options are a usage error unless they
// were given with -cluster.
func (f *tlsFlags) config(base *tls.Config) (*tls.Config, error) {
	if !f.set() {
		return base, nil
	}
	if base == nil && !f.cluster {
		return nil, fmt.Errorf("%w: the -tls options need a rediss:// URL", errUsage)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("%w: -tls-ca: %w", errUsage, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: -tls-ca: no PEM certificate in %s", errUsage, f.ca)
		}
		cfg.RootCAs = pool
	}
	if (f.cert == "") != (f.key == "") {
		return nil, fmt.Errorf("%w: -tls-cert and -tls-key go together", errUsage)
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("%w: -tls-cert/-tls-key: %w", errUsage, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	cfg.InsecureSkipVerify = f.insecure
	return cfg, nil
}
