package config

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// key32 is a valid secrets.master_key.
var key32 = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// samples holds a valid, non-default value for every key.
var samples = map[string]string{
	"http.trusted_proxies":            "10.0.0.0/8, 192.168.1.7",
	"http.client_ip_header":           "Forwarded",
	"tls.cert_file":                   "/etc/demosvc/cert.pem",
	"tls.key_file":                    "/etc/demosvc/key.pem",
	"listen":                          ":0",
	"data_dir":                        "/tmp/d",
	"log.level":                       "debug",
	"log.format":                      "json",
	"http.max_body_bytes":             "2048",
	"http.max_header_bytes":           "4096",
	"http.read_header_timeout":        "1s",
	"http.read_timeout":               "2s",
	"http.write_timeout":              "3s",
	"http.idle_timeout":               "4s",
	"http.max_connections":            "500",
	"http.max_connections_per_client": "100",
	"http.shutdown_timeout":           "1m30s",
	"plans.starter":                   "10",
	"plans.pro":                       "20",
	"auth.failures_per_minute":        "7",
	"leads.hot_threshold":             "55",
	"delivery.timeout":                "250ms",
	"delivery.max_retries":            "0",
	"delivery.backoff":                "1s",
	"delivery.backoff_factor":         "1.5",
	"delivery.concurrency":            "1024",
	"delivery.allow_private_networks": "true",
	"delivery.standard_webhooks":      "false",
	"delivery.disable_after":          "48h",
	"delivery.retention":              "0s",
	"metrics.per_webhook":             "true",
	"webhooks.max_per_account":        "1000",
	"bootstrap.plan":                  "enterprise",
	"snapshot.every":                  "0",
	"secrets.master_key":              key32,
	"testing.clock":                   "2024-01-02T03:04:05Z",
	"testing.seed":                    "-42",
	"cluster.enabled":                 "true",
	"cluster.name":                    "prod",
	"cluster.node_name":               "n1",
	"cluster.listen":                  "127.0.0.1:7222",
	"cluster.routes":                  "127.0.0.1:7222, 127.0.0.1:7223",
	"cluster.client_listen":           "127.0.0.1:5222",
	"cluster.client_token":            "a-nats-client-token-of-32-chars-or-more",
	"cluster.nats_url":                "nats://127.0.0.1:4222",
	"cluster.replicas":                "3",
	"cluster.lease_ttl":               "5s",
	"cluster.read_wait":               "2s",
	"cluster.advertise":               "10.0.0.1:8080",
	"cluster.tls_cert_file":           "/etc/demosvc/n1.crt",
	"cluster.tls_key_file":            "/etc/demosvc/n1.key",
	"cluster.tls_ca_file":             "/etc/demosvc/ca.crt",
	"dashboard.enabled":               "false",
	"dashboard.secure_cookies":        "true",
	"dashboard.session_idle":          "30m",
	"dashboard.session_max":           "24h",
	"dashboard.sign_in_per_minute":    "3",
	"dashboard.public_url":            "https://demos.example.com",
}

// get renders the value of key in c the way Keys renders defaults.
func get(t *testing.T, c *Config, key string) string {
	t.Helper()
	for _, d := range keyTable {
		if d.key == key {
			return render(d.field(c))
		}
	}
	t.Fatalf("no key %q", key)
	return ""
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demosvc.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// yamlOf renders flat keys as nested YAML with every value a quoted string.
func yamlOf(values map[string]string) string {
	var b strings.Builder
	section := ""
	for _, key := range slices.Sorted(maps.Keys(values)) {
		sec, name, nested := strings.Cut(key, ".")
		if !nested {
			b.WriteString(key + ": " + strconv.Quote(values[key]) + "\n")
			section = ""
			continue
		}
		if sec != section {
			b.WriteString(sec + ":\n")
			section = sec
		}
		b.WriteString("  " + name + ": " + strconv.Quote(values[key]) + "\n")
	}
	return b.String()
}

func envOf(values map[string]string) func(string) string {
	return func(name string) string { return values[name] }
}

func TestDefaultsMatchLoadAndKeys(t *testing.T) {
	got, err := Load(Sources{})
	if err != nil {
		t.Fatalf("Load(no sources): %v", err)
	}
	if *got != *Default() {
		t.Errorf("Load(no sources) = %+v\nwant Default() = %+v", *got, *Default())
	}
	want := map[string]string{
		"listen": "127.0.0.1:8080", "data_dir": "./data", "log.level": "info", "log.format": "text",
		"http.max_body_bytes": "1048576", "http.max_header_bytes": "16384",
		"http.read_header_timeout": "5s", "http.read_timeout": "15s", "http.write_timeout": "30s",
		"http.idle_timeout": "2m", "http.shutdown_timeout": "15s", "http.max_connections": "0", "http.max_connections_per_client": "512",
		"plans.starter": "60", "plans.pro": "300", "auth.failures_per_minute": "60",
		"leads.hot_threshold": "80", "delivery.timeout": "5s", "delivery.max_retries": "3",
		"delivery.backoff": "30s", "delivery.backoff_factor": "4", "delivery.concurrency": "16",
		"delivery.allow_private_networks": "false", "delivery.standard_webhooks": "true",
		"delivery.disable_after": "120h", "delivery.retention": "720h",
		"metrics.per_webhook":      "false",
		"webhooks.max_per_account": "25", "bootstrap.plan": "pro", "snapshot.every": "250000",
		"secrets.master_key": "", "testing.clock": "", "testing.seed": "0",
		"http.trusted_proxies": "", "http.client_ip_header": "X-Forwarded-For", "tls.cert_file": "", "tls.key_file": "",
		"dashboard.enabled": "true", "dashboard.secure_cookies": "false", "dashboard.session_idle": "12h",
		"dashboard.session_max": "168h", "dashboard.sign_in_per_minute": "10", "dashboard.public_url": "",
		"cluster.enabled": "false", "cluster.name": "demosvc", "cluster.node_name": "",
		"cluster.listen": "127.0.0.1:6222", "cluster.routes": "", "cluster.client_listen": "", "cluster.client_token": "",
		"cluster.nats_url": "", "cluster.replicas": "3", "cluster.lease_ttl": "10s", "cluster.read_wait": "5s", "cluster.advertise": "",
		"cluster.tls_cert_file": "", "cluster.tls_key_file": "", "cluster.tls_ca_file": "",
	}
	keys := Keys()
	if !slices.IsSortedFunc(keys, func(a, b KeyInfo) int { return strings.Compare(a.Key, b.Key) }) {
		t.Error("Keys() not sorted")
	}
	if len(keys) != len(want) {
		t.Errorf("Keys() has %d keys, want %d", len(keys), len(want))
	}
	for _, k := range keys {
		if w, ok := want[k.Key]; !ok || k.Default != w {
			t.Errorf("Keys() %s default = %q, want %q (known: %v)", k.Key, k.Default, w, ok)
		}
		if k.Description == "" {
			t.Errorf("Keys() %s has no description", k.Key)
		}
		if _, ok := samples[k.Key]; !ok {
			t.Errorf("no sample value for %s", k.Key)
		}
	}
}

// TestEveryFieldHasOneKey fails if a Config field is added without a key, or
// two keys share a field.
func TestEveryFieldHasOneKey(t *testing.T) {
	var leaves func(reflect.Type) int
	leaves = func(t reflect.Type) int {
		n := 0
		for f := range t.Fields() {
			if f.Type.Kind() == reflect.Struct {
				n += leaves(f.Type)
			} else {
				n++
			}
		}
		return n
	}
	c := &Config{}
	seen := map[uintptr]string{}
	for _, d := range keyTable {
		p := reflect.ValueOf(d.field(c)).Pointer()
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s share a field", d.key, other)
		}
		seen[p] = d.key
	}
	if n := leaves(reflect.TypeFor[Config]()); n != len(seen) {
		t.Errorf("Config has %d fields, key table covers %d", n, len(seen))
	}
}

// TestEverySource sets every key through each source alone.
func TestEverySource(t *testing.T) {
	env := map[string]string{}
	for k, v := range samples {
		env[envName(k)] = v
	}
	sources := map[string]Sources{
		"file":  {File: writeFile(t, yamlOf(samples))},
		"env":   {Getenv: envOf(env)},
		"flags": {Flags: samples},
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			c, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range samples {
				if got := get(t, c, k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestNativeYAML(t *testing.T) {
	path := writeFile(t, `
listen: "[::1]:9000"
http:
  max_body_bytes: 4096
delivery:
  backoff_factor: 2.5
  max_retries: 10
  allow_private_networks: yes_is_not_a_bool_in_yaml_1_2
`)
	if _, err := Load(Sources{File: path}); err == nil ||
		!strings.Contains(err.Error(), `delivery.allow_private_networks in file `+path+`: invalid boolean "yes_is_not_a_bool_in_yaml_1_2"`) {
		t.Fatalf("want invalid boolean error, got %v", err)
	}
	path = writeFile(t, `
listen: "[::1]:9000"
http:
  max_body_bytes: 4096
delivery:
  backoff_factor: 2.5
  max_retries: 10
  allow_private_networks: true
  standard_webhooks: false
leads:
  # hot_threshold: 10   (a section whose entries are all commented out is fine)
webhooks: {}
testing:
  clock: 2024-01-02T03:04:05+02:00
  seed: 7
`)
	c, err := Load(Sources{File: path})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Listen = "[::1]:9000"
	want.HTTP.MaxBodyBytes = 4096
	want.Delivery.BackoffFactor = 2.5
	want.Delivery.MaxRetries = 10
	want.Delivery.AllowPrivateNetworks = true
	want.Delivery.StandardWebhooks = false
	want.Testing.Clock = "2024-01-02T03:04:05+02:00"
	want.Testing.Seed = 7
	if *c != *want {
		t.Errorf("got %+v\nwant %+v", *c, *want)
	}
	if c, err := Load(Sources{File: writeFile(t, "")}); err != nil || *c != *Default() {
		t.Errorf("empty file: got %+v, %v; want defaults", c, err)
	}
}

func TestPrecedence(t *testing.T) {
	// Per key: distinct valid values for file, env and flag.
	values := map[string][3]string{
		"delivery.timeout":           {"7s", "8s", "9s"},
		"plans.pro":                  {"7", "8", "9"},
		"delivery.backoff_factor":    {"1.7", "1.8", "1.9"},
		"delivery.standard_webhooks": {"false", "true", "false"},
		"listen":                     {":7", ":8", ":9"},
	}
	tests := []struct {
		name            string
		file, env, flag bool
		want            int // index into the values, -1 = default
	}{
		{"defaults only", false, false, false, -1},
		{"file over default", true, false, false, 0},
		{"env over default", false, true, false, 1},
		{"flag over default", false, false, true, 2},
		{"env over file", true, true, false, 1},
		{"flag over file", true, false, true, 2},
		{"flag over env", false, true, true, 2},
		{"flag over env over file", true, true, true, 2},
	}
	for key, vals := range values {
		for _, tt := range tests {
			t.Run(key+"/"+tt.name, func(t *testing.T) {
				var src Sources
				if tt.file {
					src.File = writeFile(t, yamlOf(map[string]string{key: vals[0]}))
				}
				if tt.env {
					src.Getenv = envOf(map[string]string{envName(key): vals[1]})
				}
				if tt.flag {
					src.Flags = map[string]string{key: vals[2]}
				}
				c, err := Load(src)
				if err != nil {
					t.Fatal(err)
				}
				want := get(t, Default(), key)
				if tt.want >= 0 {
					want = vals[tt.want]
				}
				if got := get(t, c, key); got != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			})
		}
	}
}

func TestLayersMergeSiblings(t *testing.T) {
	c, err := Load(Sources{
		File:   writeFile(t, "delivery:\n  timeout: 7s\n  max_retries: 1\n"),
		Getenv: envOf(map[string]string{"DEMOSVC_DELIVERY_BACKOFF": "8s", "DEMOSVC_DELIVERY_MAX_RETRIES": ""}),
		Flags:  map[string]string{"delivery.concurrency": "9"},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Delivery
	if d.Timeout != 7*time.Second || d.MaxRetries != 1 || d.Backoff != 8*time.Second || d.Concurrency != 9 || d.BackoffFactor != 4 {
		t.Errorf("delivery = %+v; want timeout 7s and max_retries 1 (file, empty env ignored), backoff 8s (env), concurrency 9 (flag), factor 4 (default)", d)
	}
}

func TestEnvNames(t *testing.T) {
	env := map[string]string{
		"DEMOSVC_DATA_DIR":                        "/srv/d",
		"DEMOSVC_LOG_LEVEL":                       "warn",
		"DEMOSVC_HTTP_MAX_BODY_BYTES":             "77",
		"DEMOSVC_DELIVERY_ALLOW_PRIVATE_NETWORKS": "1",
	}
	var asked []string
	c, err := Load(Sources{Getenv: func(name string) string {
		asked = append(asked, name)
		return env[name]
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/d" || c.Log.Level != "warn" || c.HTTP.MaxBodyBytes != 77 || !c.Delivery.AllowPrivateNetworks {
		t.Errorf("env not applied: %+v", *c)
	}
	var want []string
	for _, k := range Keys() {
		want = append(want, envName(k.Key))
	}
	slices.Sort(asked)
	if !slices.Equal(asked, want) {
		t.Errorf("looked up %v\nwant exactly %v", asked, want)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		f, err := os.CreateTemp(dir, "*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		return f.Name()
	}
	env := func(name, value string) func(string) string { return envOf(map[string]string{name: value}) }
	flag := func(key, value string) map[string]string { return map[string]string{key: value} }
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name string
		src  Sources
		want string // exact message; "{file}" stands for src.File
	}{
		{"unknown key in file", Sources{File: file("delivery:\n  timout: 5s\n")},
			`config: unknown key "delivery.timout" in file {file}`},
		{"unknown section in file", Sources{File: file("deliveries:\n  timeout: 5s\n")},
			`config: unknown key "deliveries.timeout" in file {file}`},
		{"keys are case sensitive", Sources{File: file("Listen: :1\n")},
			`config: unknown key "Listen" in file {file}`},
		{"value where section expected", Sources{File: file("delivery: 5s\n")},
			`config: delivery in file {file}: expected a mapping of keys, got string "5s"`},
		{"section where value expected", Sources{File: file("listen:\n  host: x\n")},
			`config: unknown key "listen.host" in file {file}`},
		{"unknown flag key", Sources{Flags: flag("delivery.timout", "5s")},
			`config: unknown key "delivery.timout" in flag --delivery.timout`},
		{"flag naming a section", Sources{Flags: flag("delivery", "5s")},
			`config: unknown key "delivery" in flag --delivery`},
		{"invalid env duration", Sources{Getenv: env("DEMOSVC_DELIVERY_TIMEOUT", "abc")},
			`config: DEMOSVC_DELIVERY_TIMEOUT: invalid duration "abc"`},
		{"invalid env int", Sources{Getenv: env("DEMOSVC_PLANS_PRO", "12x")},
			`config: DEMOSVC_PLANS_PRO: invalid integer "12x"`},
		{"invalid env bool", Sources{Getenv: env("DEMOSVC_DELIVERY_STANDARD_WEBHOOKS", "yes")},
			`config: DEMOSVC_DELIVERY_STANDARD_WEBHOOKS: invalid boolean "yes" (want true, false, 1 or 0)`},
		{"retention under a minute", Sources{Getenv: env("DEMOSVC_DELIVERY_RETENTION", "30s")},
			`config: DEMOSVC_DELIVERY_RETENTION: must be 0 (off) or at least 1m0s (got 30s)`},
		{"disable_after not a duration", Sources{Getenv: env("DEMOSVC_DELIVERY_DISABLE_AFTER", "5 days")},
			`config: DEMOSVC_DELIVERY_DISABLE_AFTER: invalid duration "5 days"`},
		{"env out of range", Sources{Getenv: env("DEMOSVC_DELIVERY_CONCURRENCY", "0")},
			`config: DEMOSVC_DELIVERY_CONCURRENCY: must be 1..1024 (got 0)`},
		{"invalid flag value", Sources{Flags: flag("leads.hot_threshold", "101")},
			`config: leads.hot_threshold in flag --leads.hot_threshold: must be 0..100 (got 101)`},
		{"invalid flag duration", Sources{Flags: flag("http.idle_timeout", "5")},
			`config: http.idle_timeout in flag --http.idle_timeout: invalid duration "5"`},
		{"file duration as integer", Sources{File: file("delivery:\n  timeout: 5\n")},
			`config: delivery.timeout in file {file}: expected a duration string such as "5s", got integer 5`},
		{"file int as float", Sources{File: file("plans:\n  pro: 1.5\n")},
			`config: plans.pro in file {file}: expected an integer, got number 1.5`},
		{"file string as int", Sources{File: file("listen: 8080\n")},
			`config: listen in file {file}: expected a string, got integer 8080`},
		{"file null value", Sources{File: file("data_dir:\n")},
			`config: data_dir in file {file}: expected a string, got null`},
		{"file list value", Sources{File: file("log:\n  level: [info]\n")},
			`config: log.level in file {file}: expected a string, got a list`},
		{"file bool as int", Sources{File: file("delivery:\n  standard_webhooks: 1\n")},
			`config: delivery.standard_webhooks in file {file}: expected a boolean, got integer 1`},
		{"file out of range", Sources{File: file("webhooks:\n  max_per_account: 0\n")},
			`config: webhooks.max_per_account in file {file}: must be 1..1000 (got 0)`},
		{"file infinite float", Sources{File: file("delivery:\n  backoff_factor: .inf\n")},
			`config: delivery.backoff_factor in file {file}: invalid number +Inf`},
		{"file int overflow", Sources{File: file("testing:\n  seed: 18446744073709551615\n")},
			`config: testing.seed in file {file}: integer 18446744073709551615 out of range`},
		{"invalid file value overridden by flag still fails", Sources{
			File: file("delivery:\n  timeout: soon\n"), Flags: flag("delivery.timeout", "5s")},
			`config: delivery.timeout in file {file}: invalid duration "soon"`},
		{"file checked before env", Sources{
			File: file("plans:\n  pro: 0\n"), Getenv: env("DEMOSVC_PLANS_PRO", "x")},
			`config: plans.pro in file {file}: must be > 0 (got 0)`},
		{"malformed yaml", Sources{File: file("delivery:\n  timeout: [5s\n")},
			`config: cannot parse file {file} as YAML: `},
		{"yaml not a mapping", Sources{File: file("- listen\n")},
			`config: cannot parse file {file} as YAML: `},
		{"missing file", Sources{File: missing},
			`config: cannot read file {file}: no such file or directory`},
		{"file is a directory", Sources{File: dir},
			`config: cannot read file {file}: is a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.src)
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want error", c)
			}
			if c != nil {
				t.Errorf("Load returned a config with the error")
			}
			want := strings.ReplaceAll(tt.want, "{file}", tt.src.File)
			if got := err.Error(); got != want && !(strings.HasSuffix(want, ": ") && strings.HasPrefix(got, want)) {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
		})
	}
	if _, err := Load(Sources{File: missing}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error %v does not wrap fs.ErrNotExist", err)
	}
}

// TestValidation checks every range through flags, at and beyond each bound.
func TestValidation(t *testing.T) {
	ok, bad := true, false
	tests := []struct {
		key, value string
		ok         bool
		want       string // expected rendering if ok and different from value
	}{
		{"listen", ":0", ok, ""}, {"listen", "127.0.0.1:80", ok, ""}, {"listen", "", bad, ""}, {"listen", "localhost", bad, ""},
		{"data_dir", "d", ok, ""}, {"data_dir", "", bad, ""},
		{"log.level", "debug", ok, ""}, {"log.level", "info", ok, ""}, {"log.level", "warn", ok, ""}, {"log.level", "error", ok, ""},
		{"log.level", "trace", bad, ""}, {"log.level", "INFO", bad, ""},
		{"log.format", "text", ok, ""}, {"log.format", "json", ok, ""}, {"log.format", "xml", bad, ""},
		{"http.max_body_bytes", "1", ok, ""}, {"http.max_body_bytes", "0", bad, ""}, {"http.max_body_bytes", "-1", bad, ""},
		{"http.max_header_bytes", "1", ok, ""}, {"http.max_header_bytes", "0", bad, ""},
		{"http.read_header_timeout", "1ns", ok, ""}, {"http.read_header_timeout", "0s", bad, ""},
		{"http.read_timeout", "1ms", ok, ""}, {"http.read_timeout", "-1s", bad, ""},
		{"http.write_timeout", "1s", ok, ""}, {"http.write_timeout", "0", bad, ""},
		{"http.idle_timeout", "1h", ok, ""}, {"http.idle_timeout", "0s", bad, ""},
		{"http.max_connections", "0", ok, ""}, {"http.max_connections", "1", ok, ""}, {"http.max_connections", "-1", bad, ""},
		{"http.max_connections_per_client", "0", ok, ""}, {"http.max_connections_per_client", "-1", bad, ""},
		{"http.shutdown_timeout", "90s", ok, "1m30s"}, {"http.shutdown_timeout", "0s", bad, ""},
		{"http.client_ip_header", "X-Forwarded-For", ok, ""}, {"http.client_ip_header", "Forwarded", ok, ""},
		{"http.client_ip_header", "X-Real-IP", bad, ""}, {"http.client_ip_header", "", bad, ""},
		{"plans.starter", "1", ok, ""}, {"plans.starter", "0", bad, ""},
		{"plans.pro", "1", ok, ""}, {"plans.pro", "0", bad, ""},
		{"auth.failures_per_minute", "1", ok, ""}, {"auth.failures_per_minute", "0", bad, ""},
		{"leads.hot_threshold", "0", ok, ""}, {"leads.hot_threshold", "100", ok, ""},
		{"leads.hot_threshold", "-1", bad, ""}, {"leads.hot_threshold", "101", bad, ""},
		{"delivery.timeout", "1s", ok, ""}, {"delivery.timeout", "0s", bad, ""},
		{"delivery.max_retries", "0", ok, ""}, {"delivery.max_retries", "10", ok, ""},
		{"delivery.max_retries", "-1", bad, ""}, {"delivery.max_retries", "11", bad, ""},
		{"delivery.backoff", "1s", ok, ""}, {"delivery.backoff", "0s", bad, ""},
		{"delivery.backoff_factor", "1", ok, ""}, {"delivery.backoff_factor", "2.5", ok, ""},
		{"delivery.backoff_factor", "0.99", bad, ""}, {"delivery.backoff_factor", "NaN", bad, ""}, {"delivery.backoff_factor", "Inf", bad, ""},
		{"delivery.concurrency", "1", ok, ""}, {"delivery.concurrency", "1024", ok, ""},
		{"delivery.concurrency", "0", bad, ""}, {"delivery.concurrency", "1025", bad, ""},
		{"delivery.allow_private_networks", "1", ok, "true"}, {"delivery.allow_private_networks", "0", ok, "false"},
		{"delivery.allow_private_networks", "TRUE", bad, ""}, {"delivery.standard_webhooks", "false", ok, ""},
		{"delivery.standard_webhooks", "", bad, ""},
		{"webhooks.max_per_account", "1", ok, ""}, {"webhooks.max_per_account", "1000", ok, ""},
		{"webhooks.max_per_account", "0", bad, ""}, {"webhooks.max_per_account", "1001", bad, ""},
		{"bootstrap.plan", "starter", ok, ""}, {"bootstrap.plan", "pro", ok, ""}, {"bootstrap.plan", "enterprise", ok, ""},
		{"bootstrap.plan", "free", bad, ""},
		{"snapshot.every", "0", ok, ""}, {"snapshot.every", "-1", bad, ""},
		{"secrets.master_key", key32, ok, ""}, {"secrets.master_key", "", ok, ""},
		{"secrets.master_key", base64.StdEncoding.EncodeToString(make([]byte, 31)), bad, ""},
		{"secrets.master_key", base64.StdEncoding.EncodeToString(make([]byte, 33)), bad, ""},
		{"secrets.master_key", base64.RawStdEncoding.EncodeToString(make([]byte, 32)), bad, ""},
		{"secrets.master_key", base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16))), bad, ""},
		{"testing.clock", "2024-01-02T03:04:05Z", ok, ""}, {"testing.clock", "2024-01-02T03:04:05.5-07:00", ok, ""},
		{"testing.clock", "2024-01-02", bad, ""}, {"testing.clock", "2024-01-02 03:04:05Z", bad, ""},
		{"testing.seed", "-5", ok, ""}, {"testing.seed", "1.5", bad, ""},
		{"cluster.name", "east-1", ok, ""}, {"cluster.name", "a.b", bad, ""}, {"cluster.name", "", bad, ""},
		{"cluster.node_name", "n2", ok, ""}, {"cluster.node_name", "n 2", bad, ""},
		{"cluster.listen", "127.0.0.1:6222", ok, ""}, {"cluster.listen", "6222", bad, ""},
		{"cluster.routes", "127.0.0.1:6222,127.0.0.1:6223", ok, ""}, {"cluster.routes", "127.0.0.1", bad, ""},
		{"cluster.client_listen", "x", bad, ""}, {"cluster.client_listen", "", ok, ""},
		{"cluster.client_token", strings.Repeat("t", 31), bad, ""}, {"cluster.client_token", strings.Repeat("t", 31) + " x", bad, ""},
		{"cluster.nats_url", "nats://127.0.0.1:4222,nats://127.0.0.1:4223", ok, ""},
		{"cluster.nats_url", "http://127.0.0.1:4222", bad, ""},
		{"cluster.replicas", "1", ok, ""}, {"cluster.replicas", "0", bad, ""}, {"cluster.replicas", "6", bad, ""},
		{"cluster.lease_ttl", "1s", ok, ""}, {"cluster.lease_ttl", "500ms", bad, ""},
		{"cluster.read_wait", "0s", bad, ""},
		{"cluster.advertise", "10.0.0.1:8080", ok, ""}, {"cluster.advertise", "node1.internal:8080", ok, ""}, {"cluster.advertise", "10.0.0.1", bad, ""},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			c, err := Load(Sources{Flags: map[string]string{tt.key: tt.value}})
			if !tt.ok {
				prefix := "config: " + tt.key + " in flag --" + tt.key + ": "
				if err == nil || !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("error = %v, want prefix %q", err, prefix)
				}
				if (tt.key == "secrets.master_key" || tt.key == "cluster.client_token") && strings.Contains(err.Error(), tt.value) {
					t.Errorf("error leaks the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.value
			if tt.want != "" {
				want = tt.want
			}
			if got := get(t, c, tt.key); got != want {
				t.Errorf("%s = %q, want %q", tt.key, got, want)
			}
		})
	}
}

func TestAnUnknownDemosvcEnvironmentVariableStopsStartUp(t *testing.T) {
	env := []string{"PATH=/bin", "DEMOSVC_LISTEN=127.0.0.1:9", "DEMOSVC_DELIVERY_TIMEOUT=5s"}
	if _, err := Load(Sources{Environ: env}); err != nil {
		t.Fatalf("known variables refused: %v", err)
	}
	_, err := Load(Sources{Environ: append(env, "DEMOSVC_DELIVERY_TIMOUT=5s")})
	if err == nil || !strings.Contains(err.Error(), "DEMOSVC_DELIVERY_TIMOUT") {
		t.Fatalf("Load with a misspelt variable = %v, want an error naming it", err)
	}
	if _, err := Load(Sources{Environ: []string{"OTHER_THING=1"}}); err != nil {
		t.Errorf("a variable outside DEMOSVC_ was refused: %v", err)
	}
}

func TestTLSFilesGoTogetherAndProxiesParse(t *testing.T) {
	if _, err := Load(Sources{Flags: map[string]string{"tls.cert_file": "/c.pem"}}); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("a certificate without a key = %v, want an error", err)
	}
	_, err := Load(Sources{Getenv: envOf(map[string]string{"DEMOSVC_HTTP_TRUSTED_PROXIES": "10.0.0.0/8,nonsense"})})
	if err == nil || !strings.Contains(err.Error(), "nonsense") || !strings.Contains(err.Error(), "DEMOSVC_HTTP_TRUSTED_PROXIES") {
		t.Errorf("a bad proxy entry = %v, want an error naming it and the variable", err)
	}
	c, err := Load(Sources{Getenv: envOf(map[string]string{"DEMOSVC_HTTP_TRUSTED_PROXIES": " 10.1.2.3/8 , ::1 "})})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := c.TrustedProxyPrefixes()
	if len(got) != 2 || got[0].String() != "10.0.0.0/8" || got[1].String() != "::1/128" {
		t.Errorf("TrustedProxyPrefixes = %v", got)
	}
}

// A cluster node needs a name, and a replicated stream needs other nodes
// to reach; a single node needs neither. Route TLS takes its three files
// together.
func TestClusterKeysTogether(t *testing.T) {
	for _, tt := range []struct {
		flags map[string]string
		err   string
	}{
		{map[string]string{"cluster.enabled": "true"}, "cluster.enabled needs cluster.node_name"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1"}, "cluster.enabled needs secrets.master_key"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32}, "cluster.routes names no other node"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1"}, ""},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.nats_url": "nats://127.0.0.1:4222"}, ""},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.routes": "127.0.0.1:6223"}, ""},
		{map[string]string{"cluster.node_name": "n1"}, ""},
		// The NATS server carries the whole log: a client listener of it
		// takes only clients with the token.
		{map[string]string{"cluster.client_listen": "127.0.0.1:4222"}, "cluster.client_listen and cluster.client_token go together"},
		{map[string]string{"cluster.client_token": strings.Repeat("t", 32)}, "cluster.client_listen and cluster.client_token go together"},
		{map[string]string{"cluster.client_listen": "[::1]:4222", "cluster.client_token": strings.Repeat("t", 32)}, ""},
		// The other nodes forward writes to this one's API: an address
		// that binds every address does not say where that is.
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1", "listen": "0.0.0.0:8080"}, "set cluster.advertise"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1", "listen": ":8080"}, "set cluster.advertise"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1", "listen": "[::]:8080"}, "set cluster.advertise"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1", "listen": ":8080", "cluster.advertise": "10.0.0.1:8080"}, ""},
		{map[string]string{"listen": ":8080"}, ""},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1", "listen": "[::ffff:0.0.0.0]:8080"}, "set cluster.advertise"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.replicas": "1", "listen": ":8080", "cluster.advertise": "0.0.0.0:8080"}, "names every address"},
		// The default listen is this machine only: fine for nodes on one
		// machine, not when the routes name other hosts.
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.routes": "10.0.0.2:6222,10.0.0.3:6222"}, "set cluster.advertise"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.routes": "127.0.0.1:6223,localhost:6224"}, ""},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.routes": "10.0.0.2:6222", "cluster.advertise": "10.0.0.1:8080"}, ""},
		// TLS to the other nodes or to NATS: all three files or none.
		{map[string]string{"cluster.tls_cert_file": "n1.crt", "cluster.tls_key_file": "n1.key"}, "set all three or none"},
		{map[string]string{"cluster.tls_ca_file": "ca.crt"}, "set all three or none"},
		{map[string]string{"cluster.enabled": "true", "cluster.node_name": "n1", "secrets.master_key": key32, "cluster.routes": "127.0.0.1:6223",
			"cluster.tls_cert_file": "n1.crt", "cluster.tls_key_file": "n1.key", "cluster.tls_ca_file": "ca.crt"}, ""},
	} {
		_, err := Load(Sources{Flags: tt.flags})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%v: error %v, want %q", tt.flags, err, tt.err)
		}
	}
}

// An external NATS URL may carry a password or token: logs and errors
// leave it out.
func TestRedactedURLsLeaveOutCredentials(t *testing.T) {
	got := RedactedURLs("nats://user:s3cret@n1:4222, nats://T0KEN@n2:4222,tls://n3:4222")
	if strings.Contains(got, "s3cret") || strings.Contains(got, "T0KEN") || !strings.Contains(got, "n1:4222") || !strings.Contains(got, "tls://n3:4222") {
		t.Errorf("RedactedURLs = %q", got)
	}
	_, err := Load(Sources{Flags: map[string]string{"cluster.nats_url": "http://user:s3cret@n1:4222"}})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad nats_url with a password: %v; want an error without it", err)
	}
}
