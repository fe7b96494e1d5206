// Package config loads and validates the demosvc configuration.
//
// Values are layered with koanf, lowest precedence first: built-in defaults,
// the YAML file, DEMOSVC_* environment variables, command-line flags. Every
// value of every layer is checked; an unknown key or an invalid value stops
// start-up with an error naming the key and the source it came from.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// Config is the whole, validated configuration. Each field's comment names
// its key; Keys() gives defaults and descriptions.
type Config struct {
	Listen  string                         // listen
	DataDir string                         // data_dir
	Log     struct{ Level, Format string } // log.level, log.format

	// HTTP holds the HTTP server limits and timeouts.
	HTTP struct {
		MaxBodyBytes      int64         // http.max_body_bytes
		MaxHeaderBytes    int           // http.max_header_bytes
		ReadHeaderTimeout time.Duration // http.read_header_timeout
		ReadTimeout       time.Duration // http.read_timeout
		WriteTimeout      time.Duration // http.write_timeout
		IdleTimeout       time.Duration // http.idle_timeout
		MaxConnections    int           // http.max_connections; 0: half the open-file limit
		MaxPerClient      int           // http.max_connections_per_client; 0: no limit
		ShutdownTimeout   time.Duration // http.shutdown_timeout
		TrustedProxies    string        // http.trusted_proxies: comma-separated CIDRs or addresses
		ClientIPHeader    string        // http.client_ip_header: X-Forwarded-For or Forwarded
	}

	// TLS makes serve answer HTTPS; both files or neither.
	TLS struct{ CertFile, KeyFile string } // tls.cert_file, tls.key_file

	Plans struct{ Starter, Pro int }      // plans.starter, plans.pro: requests per minute
	Auth  struct{ FailuresPerMinute int } // auth.failures_per_minute: per client address
	Leads struct{ HotThreshold int }      // leads.hot_threshold

	// Delivery holds outgoing webhook delivery settings.
	Delivery struct {
		Timeout              time.Duration // delivery.timeout
		MaxRetries           int           // delivery.max_retries
		Backoff              time.Duration // delivery.backoff
		BackoffFactor        float64       // delivery.backoff_factor
		Concurrency          int           // delivery.concurrency
		AllowPrivateNetworks bool          // delivery.allow_private_networks
		StandardWebhooks     bool          // delivery.standard_webhooks
		DisableAfter         time.Duration // delivery.disable_after
		Retention            time.Duration // delivery.retention
	}

	// Metrics holds what /metrics may show.
	Metrics struct {
		PerWebhook bool // metrics.per_webhook: webhook ids as labels
	}

	Webhooks  struct{ MaxPerAccount int } // webhooks.max_per_account
	Bootstrap struct{ Plan string }       // bootstrap.plan
	Snapshot  struct{ Every int }         // snapshot.every
	Secrets   struct{ MasterKey string }  // secrets.master_key

	// Dashboard holds the web dashboard's settings.
	Dashboard struct {
		Enabled         bool          // dashboard.enabled
		SecureCookies   bool          // dashboard.secure_cookies
		SessionIdle     time.Duration // dashboard.session_idle
		SessionMax      time.Duration // dashboard.session_max
		SignInPerMinute int           // dashboard.sign_in_per_minute
		PublicURL       string        // dashboard.public_url
	}

	// Cluster runs the node as one of several on a replicated NATS
	// JetStream log (README "Cluster"); off, the default, is one node on
	// its own Pebble log.
	Cluster struct {
		Enabled      bool          // cluster.enabled
		Name         string        // cluster.name: the same on every node
		NodeName     string        // cluster.node_name: unique per node
		Listen       string        // cluster.listen: host:port of the NATS route listener
		Routes       string        // cluster.routes: comma-separated host:port of every node's cluster.listen
		ClientListen string        // cluster.client_listen: host:port of the NATS client listener ("" = none)
		ClientToken  string        // cluster.client_token: what a NATS client there must present
		NATSURL      string        // cluster.nats_url: an external NATS cluster instead of the embedded server
		Replicas     int           // cluster.replicas: copies of the log stream
		LeaseTTL     time.Duration // cluster.lease_ttl
		ReadWait     time.Duration // cluster.read_wait: the longest X-Min-Seq (X-Min-Position) wait
		Advertise    string        // cluster.advertise: host:port other nodes reach this node's API at
		// Mutual TLS on the embedded NATS server's routes, or on the
		// connection to cluster.nats_url: all three or none
		// (cluster.tls_cert_file, cluster.tls_key_file, cluster.tls_ca_file).
		TLSCertFile, TLSKeyFile, TLSCAFile string
	}

	// Testing is for deterministic golden tests only.
	Testing struct {
		Clock string // testing.clock: "" or an RFC 3339 time
		Seed  int64  // testing.seed
	}
}

// Sources names where configuration comes from, lowest precedence first
// after the defaults.
type Sources struct {
	// File is the YAML file path; "" means none. A missing or unparsable
	// file is an error naming the file.
	File string
	// Getenv looks up environment variables; nil means no environment. It is
	// called for every known key K with "DEMOSVC_" + upper(K, "." -> "_");
	// an empty value counts as unset.
	Getenv func(string) string
	// Environ lists the environment as KEY=VALUE; nil skips the check. A
	// DEMOSVC_ variable that names no key stops start-up like an unknown
	// YAML key, so a typo is not silently ignored.
	Environ []string
	// Flags maps config keys to raw command-line values, e.g.
	// {"data_dir": "/tmp/d"}. Errors call the flag "--" + key, so flags
	// should be named after their keys. An empty value is a value, not unset.
	Flags map[string]string
}

// Load builds the configuration from defaults, then File, then the
// environment, then Flags, and validates it.
func Load(src Sources) (*Config, error) {
	k := koanf.New(".")
	defaults := make(map[string]any, len(keyTable))
	for _, info := range Keys() {
		defaults[info.Key] = info.Default
	}
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return nil, fmt.Errorf("config: loading defaults: %w", err)
	}

	var layers []*layer
	if src.File != "" {
		l, err := fileLayer(src.File)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if err := checkEnviron(src.Environ); err != nil {
		return nil, err
	}
	if src.Getenv != nil {
		layers = append(layers, envLayer(src.Getenv))
	}
	if len(src.Flags) > 0 {
		layers = append(layers, flagLayer(src.Flags))
	}
	for _, l := range layers {
		if err := l.validate(); err != nil {
			return nil, err
		}
		if err := k.Load(confmap.Provider(l.values, "."), nil); err != nil {
			return nil, fmt.Errorf("config: merging %s: %w", l.name, err)
		}
	}

	cfg := &Config{}
	for _, d := range keyTable { // every layer is valid, so this only guards the merge
		if err := setField(cfg, d, k.Get(d.key)); err != nil {
			return nil, fmt.Errorf("config: %s: %w", d.key, err)
		}
	}
	if err := cfg.checkTogether(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// layer is one source of raw values, keyed by dotted config key.
type layer struct {
	name    string                            // e.g. "file /etc/demosvc.yaml"
	values  map[string]any                    // raw values, flat keys
	invalid func(key string, err error) error // wraps a value error naming the source
}

// validate rejects unknown keys and checks every value's type and range.
func (l *layer) validate() error {
	scratch := Default()
	for _, key := range slices.Sorted(maps.Keys(l.values)) {
		i := slices.IndexFunc(keyTable, func(d keyDef) bool { return d.key == key })
		if i < 0 {
			return fmt.Errorf("config: unknown key %q in %s", key, l.nameFor(key))
		}
		if err := setField(scratch, keyTable[i], l.values[key]); err != nil {
			return l.invalid(key, err)
		}
	}
	return nil
}

func fileLayer(path string) (*layer, error) {
	fk := koanf.New(".")
	if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("config: cannot read file %s: %w", path, pe.Err)
		}
		return nil, fmt.Errorf("config: cannot parse file %s as YAML: %w", path, err)
	}
	l := &layer{
		name:   "file " + path,
		values: fk.All(),
		invalid: func(key string, err error) error {
			return fmt.Errorf("config: %s in file %s: %w", key, path, err)
		},
	}
	// A known section left empty ("delivery:" with every entry commented
	// out) is fine; a known section given a scalar is a type error.
	for _, key := range slices.Sorted(maps.Keys(l.values)) {
		if !isSection(key) {
			continue
		}
		// Non-empty mappings were flattened away, so v is nil, {} or a scalar.
		if v := l.values[key]; v != nil && !isMap(v) {
			return nil, l.invalid(key, fmt.Errorf("expected a mapping of keys, got %s", describe(v)))
		}
		delete(l.values, key)
	}
	return l, nil
}

func envLayer(getenv func(string) string) *layer {
	l := &layer{
		name:   "environment",
		values: map[string]any{},
		invalid: func(key string, err error) error {
			return fmt.Errorf("config: %s: %w", envName(key), err)
		},
	}
	for _, d := range keyTable {
		if v := getenv(envName(d.key)); v != "" {
			l.values[d.key] = v
		}
	}
	return l
}

// flagLayer keeps the flag map flat, so validate sees the keys exactly as given.
func flagLayer(flags map[string]string) *layer {
	l := &layer{
		name:   "flags",
		values: make(map[string]any, len(flags)),
		invalid: func(key string, err error) error {
			return fmt.Errorf("config: %s in flag --%s: %w", key, key, err)
		},
	}
	for k, v := range flags {
		l.values[k] = v
	}
	return l
}

// nameFor names the source of key for unknown-key errors: "file /x.yaml",
// "environment" or "flag --key".
func (l *layer) nameFor(key string) string {
	if l.name == "flags" {
		return "flag --" + key
	}
	return l.name
}

// checkEnviron refuses a DEMOSVC_ variable that is no key's.
func checkEnviron(environ []string) error {
	if environ == nil {
		return nil
	}
	known := make(map[string]bool, len(keyTable))
	for _, d := range keyTable {
		known[envName(d.key)] = true
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "DEMOSVC_") && !known[name] {
			return fmt.Errorf("config: unknown environment variable %s: it names no configuration key "+
				"(keys are in the README; a key's variable is DEMOSVC_ + the key in upper case with dots as underscores)", name)
		}
	}
	return nil
}

// envName returns the environment variable holding key.
func envName(key string) string {
	return "DEMOSVC_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func isMap(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// isSection reports whether key is the parent of known keys, e.g. "delivery".
func isSection(key string) bool {
	return slices.ContainsFunc(keyTable, func(d keyDef) bool { return strings.HasPrefix(d.key, key+".") })
}

// setField decodes raw into the field of c described by d and validates it.
func setField(c *Config, d keyDef, raw any) error {
	if err := decode(d.field(c), raw); err != nil {
		return err
	}
	if d.check != nil {
		return d.check(c)
	}
	return nil
}

// decode converts a raw YAML, environment or flag value into *p.
func decode(p any, raw any) error {
	switch p := p.(type) {
	case *string:
		switch v := raw.(type) {
		case string:
			*p = v
		case time.Time: // YAML turns an unquoted 2024-01-02T03:04:05Z into a time
			*p = v.Format(time.RFC3339Nano)
		default:
			return fmt.Errorf("expected a string, got %s", describe(raw))
		}
	case *int:
		n, err := toInt(raw, strconv.IntSize)
		*p = int(n)
		return err
	case *int64:
		n, err := toInt(raw, 64)
		*p = n
		return err
	case *float64:
		f, err := toFloat(raw)
		*p = f
		return err
	case *bool:
		switch v := raw.(type) {
		case bool:
			*p = v
		case string:
			if v != "true" && v != "false" && v != "1" && v != "0" {
				return fmt.Errorf("invalid boolean %q (want true, false, 1 or 0)", v)
			}
			*p = v == "true" || v == "1"
		default:
			return fmt.Errorf("expected a boolean, got %s", describe(raw))
		}
	case *time.Duration:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("expected a duration string such as \"5s\", got %s", describe(raw))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*p = d
	default:
		return fmt.Errorf("unsupported field type %T", p)
	}
	return nil
}

func toInt(raw any, bits int) (int64, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
	case string:
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("invalid integer %q", v)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("expected an integer, got %s", describe(raw))
	}
	return 0, fmt.Errorf("integer %v out of range", raw)
}

func toFloat(raw any) (float64, error) {
	var f float64
	switch v := raw.(type) {
	case float64:
		f = v
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case string:
		var err error
		if f, err = strconv.ParseFloat(v, 64); err != nil {
			return 0, fmt.Errorf("invalid number %q", v)
		}
	default:
		return 0, fmt.Errorf("expected a number, got %s", describe(raw))
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid number %v", raw)
	}
	return f, nil
}

// describe names the type and value of a raw value for error messages.
func describe(raw any) string {
	switch v := raw.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case int, int64, uint64:
		return fmt.Sprintf("integer %v", v)
	case float64:
		return fmt.Sprintf("number %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", raw)
}
