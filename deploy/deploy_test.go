// Package deploy holds the deployment files of the BFF (compose, Kubernetes,
// HAProxy, Prometheus rules, Grafana dashboard). These tests keep them
// parseable and in step with the binary: config keys, ports, shutdown
// timings, metric names and runbook anchors.
package deploy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Paths relative to this directory (go test runs in the package directory).
const (
	repoRoot      = ".."
	exampleConfig = "../config.example.yaml"
	operationsDoc = "../docs/operations.md"
	makefile      = "../Makefile"
	dockerfile    = "Dockerfile"
	composeFile   = "docker-compose.yaml"
	haproxyFile   = "haproxy.cfg"
	k8sDir        = "kubernetes"
	alertsFile    = "prometheus/alerts.yaml"
	dashboardFile = "grafana/bff-dashboard.json"
)

// metric is what the BFF exports under one name.
type metric struct {
	kind   string // counter, gauge, histogram, summary
	labels []string
	bff    bool // defined by the BFF itself (checked against its source)
}

// knownMetrics is every metric name a rule or a panel may use: the BFF's own
// metrics and those of the Go and process collectors it registers, plus `up`.
// Change it together with the code, docs/operations.md's metrics reference,
// the dashboard and the alerts.
var knownMetrics = map[string]metric{
	"bff_http_requests_total":               {"counter", []string{"route", "method", "code"}, true},
	"bff_http_request_duration_seconds":     {"histogram", []string{"route", "method"}, true},
	"bff_upstream_requests_total":           {"counter", []string{"route", "status", "type"}, true},
	"bff_upstream_request_duration_seconds": {"histogram", []string{"route"}, true},
	"bff_token_cache_requests_total":        {"counter", []string{"result"}, true},
	"bff_token_cache_layer_hits_total":      {"counter", []string{"layer"}, true},
	"bff_token_mints_total":                 {"counter", []string{"result"}, true},
	"bff_token_mint_duration_seconds":       {"histogram", nil, true},
	"bff_token_lock_wait_seconds":           {"histogram", []string{"result"}, true},
	"bff_token_refresh_ahead_total":         {"counter", []string{"result"}, true},
	"bff_sessions_created_total":            {"counter", nil, true},
	"bff_logins_total":                      {"counter", []string{"method", "result"}, true},
	"bff_session_revocations_total":         {"counter", []string{"reason"}, true},
	"bff_errors_total":                      {"counter", []string{"code"}, true},
	"bff_store_up":                          {"gauge", nil, true},
	"bff_ledger_up":                         {"gauge", nil, true},
	"bff_money_requests_total":              {"counter", []string{"result"}, true},
	"bff_payments_unknown":                  {"gauge", nil, true},
	"bff_payments_unknown_oldest_seconds":   {"gauge", nil, true},
	"bff_limit_refusals_total":              {"counter", []string{"limit"}, true},
	"bff_oidc_key_fetches_total":            {"counter", nil, true},
	"bff_payment_follow_total":              {"counter", []string{"result"}, true},
	"bff_event_streams":                     {"gauge", nil, true},
	"bff_event_streams_limit":               {"gauge", nil, true},
	"bff_dpop_proofs_total":                 {"counter", []string{"use", "result"}, true},
	"bff_dpop_native_sessions_total":        {"counter", []string{"binding"}, true},

	// collectors.NewGoCollector() (default set) and NewProcessCollector().
	"go_goroutines":                 {"gauge", nil, false},
	"go_threads":                    {"gauge", nil, false},
	"go_gc_duration_seconds":        {"summary", nil, false},
	"go_memstats_alloc_bytes":       {"gauge", nil, false},
	"go_memstats_heap_alloc_bytes":  {"gauge", nil, false},
	"go_memstats_heap_inuse_bytes":  {"gauge", nil, false},
	"go_memstats_sys_bytes":         {"gauge", nil, false},
	"process_cpu_seconds_total":     {"counter", nil, false},
	"process_resident_memory_bytes": {"gauge", nil, false},
	"process_open_fds":              {"gauge", nil, false},
	"process_max_fds":               {"gauge", nil, false},

	// Prometheus' own per-target series.
	"up": {"gauge", nil, false},
}

// targetLabels are attached by the scrape (job, instance) or by Kubernetes
// service discovery relabelling; any series may carry them.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container"}

// ---------------------------------------------------------------- helpers

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(docs)+1, err)
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
	return docs
}

func yamlFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "templates" {
			return filepath.SkipDir // Helm templates are YAML only once rendered (deploy/helm/chartcheck)
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// get walks a decoded YAML/JSON tree along keys (map keys, or list indexes).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func isTrue(v any, path ...any) bool {
	b, _ := get(v, path...).(bool)
	return b
}

func intOf(v any, path ...any) (int, bool) {
	switch n := get(v, path...).(type) {
	case int:
		return n, true
	case float64:
		return int(n), true
	}
	return 0, false
}

// keyPaths collects every mapping key path of a YAML tree: "upstream.retry.max_attempts";
// list elements add "[]": "upstream.routes[].prefix".
func keyPaths(v any, prefix string, out map[string]bool) {
	switch n := v.(type) {
	case map[string]any:
		for k, c := range n {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			keyPaths(c, p, out)
		}
	case []any:
		for _, c := range n {
			keyPaths(c, prefix+"[]", out)
		}
	}
}

// checkConfigKeys fails for every key of cfg that config.example.yaml lacks.
func checkConfigKeys(t *testing.T, what string, cfg any) {
	t.Helper()
	docs := yamlDocs(t, exampleConfig)
	if len(docs) != 1 {
		t.Fatalf("%s: want one document, got %d", exampleConfig, len(docs))
	}
	known, used := map[string]bool{}, map[string]bool{}
	keyPaths(docs[0], "", known)
	keyPaths(cfg, "", used)
	if len(used) == 0 {
		t.Errorf("%s: empty configuration", what)
	}
	for _, k := range sortedKeys(used) {
		if !known[k] {
			t.Errorf("%s: key %q does not exist in config.example.yaml", what, k)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// durationKey reads a duration key of a BFF config, or its default from config.example.yaml.
func durationKey(t *testing.T, cfg any, key string) time.Duration {
	t.Helper()
	s := str(cfg, key)
	if s == "" {
		s = str(yamlDocs(t, exampleConfig)[0], key)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return d
}

// listenPort is the port of a listen address such as ":9090".
func listenPort(t *testing.T, cfg any, key string) int {
	t.Helper()
	addr := str(cfg, key)
	if addr == "" {
		addr = str(yamlDocs(t, exampleConfig)[0], key)
	}
	p, err := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	return p
}

// k8sObjects returns every object of deploy/kubernetes by kind.
func k8sObjects(t *testing.T) map[string][]any {
	t.Helper()
	objs := map[string][]any{}
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			objs[str(d, "kind")] = append(objs[str(d, "kind")], d)
		}
	}
	return objs
}

func one(t *testing.T, objs map[string][]any, kind string) any {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("want exactly one %s in %s, got %d", kind, k8sDir, len(objs[kind]))
	}
	return objs[kind][0]
}

// prodConfig is the config.yaml of the ConfigMap.
func prodConfig(t *testing.T, objs map[string][]any) any {
	t.Helper()
	for _, cm := range objs["ConfigMap"] {
		if s := str(cm, "data", "config.yaml"); s != "" {
			var cfg any
			if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
				t.Fatalf("ConfigMap %s config.yaml: %v", str(cm, "metadata", "name"), err)
			}
			return cfg
		}
	}
	t.Fatal("no ConfigMap with a config.yaml")
	return nil
}

// --------------------------------------------------------------- YAML

func TestEveryYAMLFileParses(t *testing.T) {
	files := yamlFiles(t)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		if len(yamlDocs(t, f)) == 0 {
			t.Errorf("%s: no document", f)
		}
	}
}

// --------------------------------------------------------------- Kubernetes

func TestKubernetesObjectsAreWellFormed(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var kust any
	listed := map[string]bool{}
	for _, f := range files {
		for i, d := range yamlDocs(t, f) {
			where := fmt.Sprintf("%s (document %d)", f, i+1)
			if str(d, "apiVersion") == "" || str(d, "kind") == "" {
				t.Errorf("%s: apiVersion and kind are required", where)
			}
			if str(d, "kind") == "Kustomization" {
				kust = d
				continue
			}
			listed[filepath.Base(f)] = true
			if str(d, "metadata", "name") == "" {
				t.Errorf("%s: metadata.name is required", where)
			}
		}
	}
	if kust == nil {
		t.Fatal("no kustomization.yaml in " + k8sDir)
	}
	var res []string
	for _, r := range list(kust, "resources") {
		s, _ := r.(string)
		res = append(res, s)
		if _, err := os.Stat(filepath.Join(k8sDir, s)); err != nil {
			t.Errorf("kustomization resource %q: %v", s, err)
		}
	}
	for f := range listed {
		if !slices.Contains(res, f) {
			t.Errorf("%s is not listed in kustomization.yaml's resources", f)
		}
	}
	objs := k8sObjects(t)
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ConfigMap", "Secret", "NetworkPolicy"} {
		if len(objs[kind]) == 0 {
			t.Errorf("no %s", kind)
		}
	}
}

func TestDeployment(t *testing.T) {
	objs := k8sObjects(t)
	dep := one(t, objs, "Deployment")
	cfg := prodConfig(t, objs)
	adminPort := listenPort(t, cfg, "admin_listen")
	publicPort := listenPort(t, cfg, "listen")

	// The HPA owns the count when there is one; the Deployment then has none.
	replicas, _ := intOf(dep, "spec", "replicas")
	for _, hpa := range objs["HorizontalPodAutoscaler"] {
		if str(hpa, "spec", "scaleTargetRef", "name") == str(dep, "metadata", "name") {
			if get(dep, "spec", "replicas") != nil {
				t.Error("the Deployment sets replicas and an HPA scales it: each apply would reset the HPA's count")
			}
			replicas, _ = intOf(hpa, "spec", "minReplicas")
		}
	}
	if replicas < 3 {
		t.Errorf("replicas (or the HPA's minReplicas) = %d, want >= 3", replicas)
	}
	pod := get(dep, "spec", "template", "spec")
	if !isTrue(pod, "securityContext", "runAsNonRoot") {
		t.Error("pod securityContext.runAsNonRoot must be true")
	}
	if uid, ok := intOf(pod, "securityContext", "runAsUser"); ok && uid == 0 {
		t.Error("pod runs as uid 0")
	}
	if str(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Error("pod seccompProfile must be RuntimeDefault")
	}
	if len(list(pod, "topologySpreadConstraints")) == 0 {
		t.Error("no topologySpreadConstraints")
	}
	containers := list(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0]
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		n, _ := intOf(p, "containerPort")
		ports[str(p, "name")] = n
	}
	resolve := func(v any) int {
		switch p := v.(type) {
		case int:
			return p
		case string:
			return ports[p]
		}
		return 0
	}
	if !slices.Contains(mapsValues(ports), adminPort) || !slices.Contains(mapsValues(ports), publicPort) {
		t.Errorf("container ports %v lack listen %d or admin_listen %d", ports, publicPort, adminPort)
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if got := str(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path = %q, want %q", probe, got, path)
		}
		if got := resolve(get(c, probe, "httpGet", "port")); got != adminPort {
			t.Errorf("%s port = %d, want the admin port %d", probe, got, adminPort)
		}
	}
	sc := get(c, "securityContext")
	if !isTrue(sc, "readOnlyRootFilesystem") {
		t.Error("container readOnlyRootFilesystem must be true")
	}
	if b, ok := get(sc, "allowPrivilegeEscalation").(bool); !ok || b {
		t.Error("container allowPrivilegeEscalation must be false")
	}
	if !slices.Contains(list(sc, "capabilities", "drop"), any("ALL")) {
		t.Error("container must drop ALL capabilities")
	}
	for _, k := range []string{"requests", "limits"} {
		if get(c, "resources", k, "memory") == nil || get(c, "resources", k, "cpu") == nil {
			t.Errorf("resources.%s needs cpu and memory", k)
		}
	}

	// Shutdown timing: preStop, then SIGTERM, shutdown_delay and the drain.
	preStop := get(c, "lifecycle", "preStop")
	if preStop == nil {
		t.Fatal("no preStop hook")
	}
	var pre time.Duration
	if s, ok := intOf(preStop, "sleep", "seconds"); ok {
		pre = time.Duration(s) * time.Second
	} else if get(preStop, "exec") == nil {
		t.Error("preStop must sleep (sleep.seconds or exec)")
	}
	delay := durationKey(t, cfg, "shutdown_delay")
	drain := durationKey(t, cfg, "shutdown_timeout")
	if pre > 2*delay+5*time.Second {
		t.Errorf("preStop sleep %v is out of step with shutdown_delay %v", pre, delay)
	}
	grace, ok := intOf(pod, "terminationGracePeriodSeconds")
	if !ok {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	if g := time.Duration(grace) * time.Second; g <= pre+delay+drain {
		t.Errorf("terminationGracePeriodSeconds %v <= preStop %v + shutdown_delay %v + shutdown_timeout %v", g, pre, delay, drain)
	}

	// Secrets come from the Secret, by file or secretKeyRef, never as literals.
	for _, e := range list(c, "env") {
		name := str(e, "name")
		if strings.HasPrefix(name, "BFF_") && get(e, "valueFrom", "secretKeyRef") == nil {
			t.Errorf("env %s should come from a secretKeyRef", name)
		}
	}
	secretFile := str(cfg, "upstream", "client_secret_file")
	if secretFile == "" {
		t.Fatal("the production config must use upstream.client_secret_file")
	}
	mounted := false
	for _, m := range list(c, "volumeMounts") {
		if mp := str(m, "mountPath"); strings.HasPrefix(secretFile, mp+"/") {
			mounted = str(m, "subPath") == "" // a subPath mount never sees Secret updates
		}
	}
	if !mounted {
		t.Errorf("%s is not in a (non-subPath) volume mount", secretFile)
	}
}

// TestEverySecretKeyTheDeploymentMountsExists: every key of a Secret that
// the Deployment reads (an env secretKeyRef, a secret volume's items, a
// projected volume's secrets) is in that Secret of deploy/kubernetes. The
// kubelet does not start a pod whose mounted key is missing: it stays in
// ContainerCreating ("couldn't find key admin-token in Secret"), and a
// rollout stalls behind it.
func TestEverySecretKeyTheDeploymentMountsExists(t *testing.T) {
	objs := k8sObjects(t)
	secrets := map[string]map[string]bool{}
	for _, s := range objs["Secret"] {
		keys := map[string]bool{}
		for _, field := range []string{"data", "stringData"} {
			if m, ok := get(s, field).(map[string]any); ok {
				for k := range m {
					keys[k] = true
				}
			}
		}
		secrets[str(s, "metadata", "name")] = keys
	}
	type ref struct{ secret, key, where string }
	var refs []ref
	dep := one(t, objs, "Deployment")
	pod := get(dep, "spec", "template", "spec")
	for _, field := range []string{"initContainers", "containers"} {
		for _, c := range list(pod, field) {
			for _, e := range list(c, "env") {
				if r := get(e, "valueFrom", "secretKeyRef"); r != nil && !isTrue(r, "optional") {
					refs = append(refs, ref{str(r, "name"), str(r, "key"), "env " + str(e, "name")})
				}
			}
			for _, e := range list(c, "envFrom") {
				if r := get(e, "secretRef"); r != nil && !isTrue(r, "optional") && secrets[str(r, "name")] == nil {
					t.Errorf("envFrom names the Secret %s, which deploy/kubernetes does not hold", str(r, "name"))
				}
			}
		}
	}
	items := func(where string, s any, name string) {
		if s == nil || isTrue(s, "optional") {
			return
		}
		if len(list(s, "items")) == 0 && secrets[name] == nil {
			t.Errorf("%s mounts the Secret %s, which deploy/kubernetes does not hold", where, name)
		}
		for _, it := range list(s, "items") {
			refs = append(refs, ref{name, str(it, "key"), where})
		}
	}
	for _, v := range list(pod, "volumes") {
		where := "volume " + str(v, "name")
		items(where, get(v, "secret"), str(v, "secret", "secretName"))
		for _, src := range list(v, "projected", "sources") {
			items(where, get(src, "secret"), str(src, "secret", "name"))
		}
	}
	if len(refs) == 0 {
		t.Fatal("the Deployment reads no Secret key: the test reads the wrong fields")
	}
	for _, r := range refs {
		keys, ok := secrets[r.secret]
		switch {
		case !ok:
			t.Errorf("%s: the Secret %s is not in %s", r.where, r.secret, k8sDir)
		case !keys[r.key]:
			t.Errorf("%s: the Secret %s has no key %q (its keys: %v): the pods would stay in ContainerCreating", r.where, r.secret, r.key, sortedKeys(keys))
		}
	}
}

func mapsValues(m map[string]int) []int {
	var vs []int
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

func TestServicesKeepTheAdminPortInternal(t *testing.T) {
	objs := k8sObjects(t)
	cfg := prodConfig(t, objs)
	admin := listenPort(t, cfg, "admin_listen")
	public := 0
	for _, svc := range objs["Service"] {
		name := str(svc, "metadata", "name")
		typ := str(svc, "spec", "type")
		exposesAdmin := false
		for _, p := range list(svc, "spec", "ports") {
			tp := get(p, "targetPort")
			if tp == "admin" || tp == admin {
				exposesAdmin = true
			}
		}
		if exposesAdmin && typ != "" && typ != "ClusterIP" {
			t.Errorf("Service %s exposes the admin port with type %s", name, typ)
		}
		if !exposesAdmin {
			public++
		}
	}
	if public == 0 {
		t.Error("no public Service (one without the admin port)")
	}
	if len(objs["Service"])-public == 0 {
		t.Error("no metrics Service for the admin port")
	}
}

func TestProductionConfigMap(t *testing.T) {
	cfg := prodConfig(t, k8sObjects(t))
	checkConfigKeys(t, "ConfigMap config.yaml", cfg)
	if str(cfg, "env") != "production" {
		t.Error("env must be production")
	}
	if !strings.HasPrefix(str(cfg, "public_url"), "https://") {
		t.Error("public_url must be https")
	}
	if str(cfg, "auth", "mode") != "oidc" {
		t.Error("auth.mode must be oidc")
	}
	for _, k := range []string{"encryption_key", "url"} {
		if str(cfg, "redis", k) != "" {
			t.Errorf("redis.%s belongs in the Secret, not the ConfigMap", k)
		}
	}
	if len(list(cfg, "session", "keys")) > 0 || str(cfg, "upstream", "client_secret") != "" || str(cfg, "auth", "oidc", "client_secret") != "" {
		t.Error("secrets belong in the Secret, not the ConfigMap")
	}
	if str(cfg, "ledger", "postgres_url") != "" {
		t.Error("ledger.postgres_url (it holds a password) belongs in the Secret, not the ConfigMap")
	}
}

// checkLedgerURL checks a ledger.postgres_url and returns it parsed.
func checkLedgerURL(t *testing.T, where, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: the ledger URL does not parse: %v", where, err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		t.Errorf("%s: the ledger URL's scheme is %q, want postgres", where, u.Scheme)
	}
	if u.Hostname() == "" || u.User == nil || u.User.Username() == "" || strings.Trim(u.Path, "/") == "" {
		t.Errorf("%s: the ledger URL needs a host, a user and a database", where)
	}
	return u
}

// TestKubernetesLedger: production refuses to start without
// ledger.postgres_url, so the Deployment takes it from the Secret, and the
// NetworkPolicy lets the pods reach the database.
func TestKubernetesLedger(t *testing.T) {
	objs := k8sObjects(t)
	dep := one(t, objs, "Deployment")
	var ref any
	for _, e := range list(get(dep, "spec", "template", "spec", "containers", 0), "env") {
		if str(e, "name") == "BFF_LEDGER_POSTGRES_URL" {
			ref = get(e, "valueFrom", "secretKeyRef")
		}
	}
	if ref == nil {
		t.Fatal("the Deployment has no BFF_LEDGER_POSTGRES_URL from a secretKeyRef: production refuses to start without ledger.postgres_url")
	}
	raw := ""
	for _, sec := range objs["Secret"] {
		if str(sec, "metadata", "name") == str(ref, "name") {
			raw = str(sec, "stringData", str(ref, "key"))
		}
	}
	if raw == "" {
		t.Fatalf("Secret %s has no key %s", str(ref, "name"), str(ref, "key"))
	}
	u := checkLedgerURL(t, "Secret "+str(ref, "name"), raw)
	port := 5432
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	}
	if !slices.Contains([]string{"verify-full", "verify-ca"}, u.Query().Get("sslmode")) {
		t.Errorf("the production ledger URL should verify the server's certificate (sslmode=verify-full), got sslmode=%q", u.Query().Get("sslmode"))
	}
	allowed := false
	for _, np := range objs["NetworkPolicy"] {
		for _, rule := range list(np, "spec", "egress") {
			for _, p := range list(rule, "ports") {
				if n, _ := intOf(p, "port"); n == port {
					allowed = true
				}
			}
		}
	}
	if !allowed {
		t.Errorf("no NetworkPolicy egress rule allows the ledger's port %d", port)
	}
}

// --------------------------------------------------------------- metrics

// promIdents splits a PromQL expression into the metric names it reads and
// the label names it uses, failing on unknown identifiers.
var (
	reString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	reRange    = regexp.MustCompile(`\[[^\]]*\]`)
	reOffset   = regexp.MustCompile(`\boffset\s+-?([0-9]+(ms|[smhdwy]))+`)
	reGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	reSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}`)
	reMatcher  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	reIdent    = regexp.MustCompile(`\$?[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reNumber   = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])[0-9][0-9.]*([eE][-+]?[0-9]+)?`)
)

var promKeywords = []string{
	"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
	"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group",
	"rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear", "histogram_quantile",
	"abs", "absent", "absent_over_time", "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max",
	"changes", "resets", "label_replace", "label_join", "time", "timestamp", "vector", "scalar", "sort", "sort_desc",
	"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time",
	"last_over_time", "present_over_time", "exp", "ln", "log2", "log10", "sqrt", "inf", "nan",
}

// allLabels is every label any known metric carries, for grouping clauses.
func allLabels() []string {
	ls := append([]string{"le", "quantile"}, targetLabels...)
	for _, m := range knownMetrics {
		ls = append(ls, m.labels...)
	}
	return ls
}

// baseMetric maps a series name to its metric (histogram and summary suffixes).
func baseMetric(name string) (string, metric, bool) {
	if m, ok := knownMetrics[name]; ok {
		return name, m, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok {
			if m, ok := knownMetrics[b]; ok && (m.kind == "histogram" || (m.kind == "summary" && suf != "_bucket")) {
				return b, m, true
			}
		}
	}
	return "", metric{}, false
}

func checkPromQL(t *testing.T, where, expr string) (metrics []string) {
	t.Helper()
	e := reString.ReplaceAllString(expr, `""`)
	e = reRange.ReplaceAllString(e, " ")
	e = reOffset.ReplaceAllString(e, " ")
	labels := allLabels()
	e = reGrouping.ReplaceAllStringFunc(e, func(s string) string {
		m := reGrouping.FindStringSubmatch(s)
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
				t.Errorf("%s: unknown label %q in a %s clause (expression: %s)", where, l, m[1], expr)
			}
		}
		return " "
	})
	e = reSelector.ReplaceAllStringFunc(e, func(s string) string {
		m := reSelector.FindStringSubmatch(s)
		name := m[1]
		var allowed []string
		if name == "" || slices.Contains(promKeywords, name) {
			allowed = labels
		} else if _, mt, ok := baseMetric(name); ok {
			allowed = append(append(append([]string{}, mt.labels...), targetLabels...), "le", "quantile")
		}
		for _, part := range strings.Split(m[2], ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			mm := reMatcher.FindStringSubmatch(part)
			if mm == nil {
				t.Errorf("%s: cannot read matcher %q in %s", where, part, expr)
				continue
			}
			if allowed != nil && !slices.Contains(allowed, mm[1]) {
				t.Errorf("%s: %s has no label %q (in %s)", where, name, mm[1], expr)
			}
		}
		return " " + name + " "
	})
	e = reNumber.ReplaceAllString(e, "$1 ")
	for _, id := range reIdent.FindAllString(e, -1) {
		if strings.HasPrefix(id, "$") || slices.Contains(promKeywords, id) {
			continue
		}
		if _, _, ok := baseMetric(id); !ok {
			t.Errorf("%s: %q is not a known metric (expression: %s)", where, id, expr)
			continue
		}
		metrics = append(metrics, id)
	}
	return metrics
}

func TestKnownMetricsMatchTheSource(t *testing.T) {
	inSource := map[string]bool{}
	reName := regexp.MustCompile(`Name:\s*"(bff_[a-z0-9_]+)"`) // prometheus.*Opts{Name: ...}
	collectors := map[string]bool{}
	for _, dir := range []string{"../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range reName.FindAllStringSubmatch(string(b), -1) {
				inSource[m[1]] = true
			}
			for _, c := range []string{"NewGoCollector", "NewProcessCollector"} {
				if strings.Contains(string(b), c) {
					collectors[c] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, m := range knownMetrics {
		if m.bff && !inSource[name] {
			t.Errorf("metric %s is no longer defined in the code: fix the dashboard, the alerts and this list", name)
		}
	}
	for name := range inSource {
		if _, ok := knownMetrics[name]; !ok {
			t.Errorf("metric %s is defined in the code but unknown here: add it to knownMetrics and docs/operations.md", name)
		}
	}
	if len(collectors) != 2 {
		t.Errorf("the Go and process collectors are not both registered (found %v): drop go_*/process_* from knownMetrics", collectors)
	}
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range knownMetrics {
		if m.bff && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s lacks %s in its metrics reference", operationsDoc, name)
		}
	}
}

func TestAlertRules(t *testing.T) {
	docs := yamlDocs(t, alertsFile)
	if len(docs) != 1 {
		t.Fatalf("%s: want one document", alertsFile)
	}
	anchors := docAnchors(t)
	reRunbook := regexp.MustCompile(`docs/operations\.md#([a-z0-9_-]+)$`)
	names := map[string]bool{}
	used := map[string]bool{}
	groups := list(docs[0], "groups")
	if len(groups) == 0 {
		t.Fatal("no groups")
	}
	for _, g := range groups {
		if str(g, "name") == "" {
			t.Error("a group without a name")
		}
		for _, r := range list(g, "rules") {
			name := str(r, "alert")
			if name == "" {
				t.Errorf("group %s: only alerting rules expected", str(g, "name"))
				continue
			}
			if names[name] {
				t.Errorf("alert %s defined twice", name)
			}
			names[name] = true
			if _, err := time.ParseDuration(str(r, "for")); err != nil {
				t.Errorf("alert %s: for: %v", name, err)
			}
			if sev := str(r, "labels", "severity"); !slices.Contains([]string{"critical", "warning", "info"}, sev) {
				t.Errorf("alert %s: severity %q", name, sev)
			}
			if str(r, "annotations", "summary") == "" {
				t.Errorf("alert %s: no summary", name)
			}
			m := reRunbook.FindStringSubmatch(str(r, "annotations", "runbook_url"))
			if m == nil {
				t.Errorf("alert %s: runbook_url must point at docs/operations.md#anchor", name)
			} else if !anchors[m[1]] {
				t.Errorf("alert %s: docs/operations.md has no heading for #%s", name, m[1])
			}
			expr := str(r, "expr")
			if expr == "" {
				t.Errorf("alert %s: no expr", name)
			}
			for _, mt := range checkPromQL(t, "alert "+name, expr) {
				b, _, _ := baseMetric(mt)
				used[b] = true
			}
		}
	}
	// The brief's alerts: mint failures, auth failures, session store, p99 latency, instance down;
	// and the payments ledger: down, and payments whose outcome is unknown.
	for _, m := range []string{"bff_token_mints_total", "bff_http_requests_total", "bff_http_request_duration_seconds", "up", "bff_ledger_up", "bff_money_requests_total"} {
		if !used[m] {
			t.Errorf("no alert uses %s", m)
		}
	}
}

// docAnchors are the GitHub anchors of docs/operations.md's headings.
func docAnchors(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	reDrop := regexp.MustCompile(`[^a-z0-9 _-]`)
	fence := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(reDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		anchors[slug] = true
	}
	return anchors
}

func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if v, _ := dash["schemaVersion"].(float64); v < 36 {
		t.Errorf("schemaVersion %v, want a current one (~39)", dash["schemaVersion"])
	}
	if str(dash, "uid") == "" || str(dash, "title") == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	// Tracing: a traces data source to choose, and a link to
	// its failed requests.
	if !strings.Contains(string(b), `"name": "traces"`) || !strings.Contains(string(b), `"url": "/explore?`) || !strings.Contains(string(b), "${traces}") {
		t.Error("the dashboard lacks the traces data source variable or the link to the traces")
	}
	used := map[string]bool{}
	ids := map[float64]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch n := v.(type) {
		case map[string]any:
			if id, ok := n["id"].(float64); ok && n["gridPos"] != nil {
				if ids[id] {
					t.Errorf("panel id %v used twice", id)
				}
				ids[id] = true
			}
			for k, c := range n {
				if s, ok := c.(string); ok && (k == "expr" || k == "query" || k == "definition") && path != "templating.datasource" {
					if k == "query" && n["type"] == "datasource" {
						continue
					}
					e := strings.TrimSpace(s)
					if inner, ok := strings.CutPrefix(e, "label_values("); ok {
						// label_values(metric{...}, label)
						inner = strings.TrimSuffix(inner, ")")
						if i := strings.LastIndex(inner, ","); i >= 0 {
							e = inner[:i]
						}
					}
					for _, m := range checkPromQL(t, "dashboard "+path+"."+k, e) {
						base, _, _ := baseMetric(m)
						used[base] = true
					}
					continue
				}
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range n {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("", dash)
	// Every BFF metric has a panel; the runtime too.
	for name, m := range knownMetrics {
		if m.bff && !used[name] {
			t.Errorf("no dashboard panel uses %s", name)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes"} {
		if !used[name] {
			t.Errorf("no dashboard panel uses %s", name)
		}
	}
}

// --------------------------------------------------------------- Dockerfile

// dockerStages splits deploy/Dockerfile into stages of instructions (continuations joined).
func dockerStages(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	return dockerfileStages(string(b))
}

func TestDockerfile(t *testing.T) {
	mk, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^build:`).Match(mk) {
		t.Fatal("the Makefile has no build target")
	}
	stages := dockerStages(t)
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stages", len(stages))
	}
	reMake := regexp.MustCompile(`^RUN\s.*\bmake build BIN=(\S+)`)
	bin := ""
	for _, ins := range stages[0] {
		if m := reMake.FindStringSubmatch(ins); m != nil {
			bin = m[1]
		}
		if strings.HasPrefix(ins, "RUN") && strings.Contains(ins, "go build") {
			t.Errorf("the build stage must use `make build`, not go build: %s", ins)
		}
	}
	if bin == "" {
		t.Fatal("the build stage does not RUN `make build BIN=...`")
	}
	final := stages[len(stages)-1]
	if !strings.Contains(final[0], "distroless") {
		t.Errorf("final stage %q is not distroless", final[0])
	}
	user := ""
	copied, entry := false, false
	for _, ins := range final {
		f := strings.Fields(ins)
		switch strings.ToUpper(f[0]) {
		case "USER":
			user = f[1]
		case "COPY":
			if strings.Contains(ins, bin+"/bff") {
				copied = true
			}
		case "ENTRYPOINT":
			entry = strings.Contains(ins, "/bff")
		}
	}
	name, _, _ := strings.Cut(user, ":")
	if name == "" || name == "root" || name == "0" || (name != "nonroot" && !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(name)) {
		t.Errorf("final stage USER = %q, want nonroot (a numeric non-zero uid, e.g. 65532)", user)
	}
	if !copied || !entry {
		t.Error("the final stage must copy " + bin + "/bff and run it")
	}
	targets := map[string]bool{}
	for _, s := range stages {
		f := strings.Fields(s[0])
		if len(f) == 4 && strings.EqualFold(f[2], "AS") {
			targets[f[3]] = true
		}
	}
	if !targets["upstream-sim"] {
		t.Error("no upstream-sim target")
	}
}

// --------------------------------------------------------------- compose

func TestCompose(t *testing.T) {
	docs := yamlDocs(t, composeFile)
	if len(docs) != 1 {
		t.Fatalf("%s: want one document", composeFile)
	}
	services, _ := get(docs[0], "services").(map[string]any)
	if len(services) == 0 {
		t.Fatal("no services")
	}
	absDockerfile, _ := filepath.Abs(dockerfile)
	targets := map[string][]string{}
	var haproxy string
	for _, name := range sortedKeys(services) {
		svc := services[name]
		if !isTrue(svc, "read_only") {
			t.Errorf("service %s: read_only must be true", name)
		}
		if !slices.Contains(list(svc, "security_opt"), any("no-new-privileges:true")) {
			t.Errorf("service %s: security_opt needs no-new-privileges:true", name)
		}
		if b := get(svc, "build"); b != nil {
			p, _ := filepath.Abs(filepath.Join(str(b, "context"), str(b, "dockerfile")))
			if p != absDockerfile {
				t.Errorf("service %s builds %s, want deploy/Dockerfile", name, p)
			}
			targets[str(b, "target")] = append(targets[str(b, "target")], name)
		}
		img := str(svc, "image")
		if strings.HasPrefix(img, "haproxy") {
			haproxy = name
			found := false
			for _, v := range list(svc, "volumes") {
				if filepath.Clean(str(v, "source")) == haproxyFile {
					found = true
				}
			}
			if !found {
				t.Errorf("service %s does not mount %s", name, haproxyFile)
			}
		}
		if strings.HasPrefix(img, "redis") && !strings.HasPrefix(img, "redis:7") {
			t.Errorf("service %s: want Redis 7, got %s", name, img)
		}
	}
	bffs := targets["bff"]
	if len(bffs) < 2 {
		t.Fatalf("want >= 2 BFF services (build target bff), got %v", bffs)
	}
	if len(targets["upstream-sim"]) != 1 {
		t.Errorf("want one upstream-sim service, got %v", targets["upstream-sim"])
	}
	if haproxy == "" {
		t.Error("no HAProxy service")
	}
	if !slices.ContainsFunc(sortedKeys(services), func(n string) bool { return strings.HasPrefix(str(services[n], "image"), "redis:7") }) {
		t.Error("no Redis 7 service")
	}

	// The payments ledger: one PostgreSQL, its data in a named volume,
	// healthy before the BFFs start.
	var postgres string
	for _, name := range sortedKeys(services) {
		if strings.HasPrefix(str(services[name], "image"), "postgres:") {
			if postgres != "" {
				t.Errorf("two PostgreSQL services: %s and %s", postgres, name)
			}
			postgres = name
		}
	}
	if postgres == "" {
		t.Fatal("no PostgreSQL service (the payments ledger)")
	}
	pg := services[postgres]
	if !strings.Contains(fmt.Sprint(get(pg, "healthcheck", "test")), "pg_isready") {
		t.Errorf("service %s: the healthcheck must run pg_isready", postgres)
	}
	named := false
	declared, _ := get(docs[0], "volumes").(map[string]any)
	for _, v := range list(pg, "volumes") {
		if _, ok := declared[str(v, "source")]; ok && str(v, "type") == "volume" && str(v, "target") != "" {
			named = true
		}
	}
	if !named {
		t.Errorf("service %s: its data needs a named volume (type volume, declared under volumes:)", postgres)
	}

	// The BFFs' mounted config: known keys, dev mode only with env development.
	adminPort := 0
	for _, name := range bffs {
		svc := services[name]
		var cfgPath string
		for _, v := range list(svc, "volumes") {
			if str(v, "target") == "/etc/bff/config.yaml" {
				cfgPath = str(v, "source")
			}
		}
		if cfgPath == "" {
			t.Fatalf("service %s does not mount a config file at /etc/bff/config.yaml", name)
		}
		cfgs := yamlDocs(t, cfgPath)
		cfg := cfgs[0]
		checkConfigKeys(t, cfgPath, cfg)
		if str(cfg, "auth", "mode") == "dev" && str(cfg, "env") != "development" {
			t.Errorf("%s: auth.mode dev needs env development", cfgPath)
		}
		if str(cfg, "redis", "url") == "" && get(services[name], "environment", "BFF_REDIS_URL") == nil {
			t.Errorf("%s: the instances must share a Redis", cfgPath)
		}
		// Without a ledger URL each instance keeps its own in-process
		// ledger, and a payment repeated through the other could run twice.
		ledgerURL := str(cfg, "ledger", "postgres_url")
		if ledgerURL == "" {
			ledgerURL = str(svc, "environment", "BFF_LEDGER_POSTGRES_URL")
		}
		if ledgerURL == "" {
			t.Errorf("service %s: no ledger.postgres_url (in %s or BFF_LEDGER_POSTGRES_URL): the instances must share the PostgreSQL ledger", name, cfgPath)
		} else {
			u := checkLedgerURL(t, "service "+name, ledgerURL)
			pass, _ := u.User.Password()
			if u.Hostname() != postgres || u.User.Username() != str(pg, "environment", "POSTGRES_USER") ||
				strings.Trim(u.Path, "/") != str(pg, "environment", "POSTGRES_DB") || pass != str(pg, "environment", "POSTGRES_PASSWORD") {
				t.Errorf("service %s: the ledger URL does not match service %s's host, POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB", name, postgres)
			}
		}
		if str(svc, "depends_on", postgres, "condition") != "service_healthy" {
			t.Errorf("service %s: depends_on %s must have condition service_healthy", name, postgres)
		}
		adminPort = listenPort(t, cfg, "admin_listen")
		grace, err := time.ParseDuration(str(svc, "stop_grace_period"))
		if err != nil {
			t.Errorf("service %s: stop_grace_period: %v", name, err)
		} else if min := durationKey(t, cfg, "shutdown_delay") + durationKey(t, cfg, "shutdown_timeout"); grace <= min {
			t.Errorf("service %s: stop_grace_period %v <= shutdown_delay + shutdown_timeout (%v)", name, grace, min)
		}
		for _, p := range list(svc, "ports") {
			s, _ := p.(string)
			if strings.HasSuffix(s, ":"+strconv.Itoa(adminPort)) && !strings.HasPrefix(s, "127.0.0.1:") {
				t.Errorf("service %s publishes the admin port beyond loopback: %s", name, s)
			}
		}
	}

	// HAProxy: round robin over the BFFs, health-checked on the admin port's /readyz.
	b, err := os.ReadFile(haproxyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for _, want := range []string{"balance roundrobin", "option httpchk", "http-check expect status 200"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("%s lacks %q", haproxyFile, want)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*(http-check send meth GET uri /readyz|option httpchk GET /readyz)\b`).MatchString(cfg) {
		t.Errorf("%s does not health-check /readyz", haproxyFile)
	}
	if !regexp.MustCompile(`(?m)^\s*(default-server|server)\s.*\bcheck\b.*\bport ` + strconv.Itoa(adminPort) + `\b`).MatchString(cfg) {
		t.Errorf("%s: health checks must go to the admin port %d", haproxyFile, adminPort)
	}
	for _, name := range bffs {
		if !regexp.MustCompile(`(?m)^\s*server\s+\S+\s+` + regexp.QuoteMeta(name) + `:8080\b`).MatchString(cfg) {
			t.Errorf("%s has no server for service %s", haproxyFile, name)
		}
	}
}

// --------------------------------------------------------------- HAProxy

const e2eLBTest = "../e2e/lb_test.go" // startLB's config repeats haproxy.cfg's rules

// haproxySections are the keywords that open a section of an HAProxy config.
var haproxySections = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"resolvers": true, "peers": true, "userlist": true, "mailers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true,
}

// haproxyCode is a config line without its comment: HAProxy starts a comment
// at a '#' outside quotes that no backslash escapes.
func haproxyCode(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && quote != '\'':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

// haproxyDirective is one non-empty line of an HAProxy config.
type haproxyDirective struct {
	line    int    // 1-based
	section string // "defaults", "frontend public", ...
	code    string // without its comment, trimmed
	fields  []string
}

func haproxyDirectives(t *testing.T, path string) []haproxyDirective {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ds []haproxyDirective
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		code := haproxyCode(line)
		if code == "" {
			continue
		}
		f := strings.Fields(code)
		if haproxySections[f[0]] {
			section = code
		}
		ds = append(ds, haproxyDirective{line: i + 1, section: section, code: code, fields: f})
	}
	return ds
}

// isRequestIDHeaderRule reports whether d sets X-Request-Id on the request.
func isRequestIDHeaderRule(d haproxyDirective) bool {
	return len(d.fields) >= 3 && d.fields[0] == "http-request" &&
		(d.fields[1] == "set-header" || d.fields[1] == "add-header") && strings.EqualFold(d.fields[2], "X-Request-Id")
}

// retryOnConditions checks the conditions of one retry-on line: only those
// where the request surely did not reach an instance. A request that reached
// one may be a payment that already ran; only the client, with its
// Idempotency-Key, may send it again.
func retryOnConditions(t *testing.T, where string, conds []string) {
	t.Helper()
	allowed := map[string]bool{"conn-failure": true, "0rtt-rejected": true}
	if len(conds) == 0 {
		t.Errorf("%s: retry-on without a condition", where)
	}
	for _, c := range conds {
		if !allowed[c] {
			t.Errorf("%s: retry-on %s: HAProxy would resend a request that may have reached an instance (a payment may run twice); only conn-failure (and 0rtt-rejected) are allowed", where, c)
		}
	}
}

func TestHAProxyRetriesOnlyRequestsThatNeverReachedAnInstance(t *testing.T) {
	retryOn, redispatch, retries := 0, false, false
	for _, d := range haproxyDirectives(t, haproxyFile) {
		where := fmt.Sprintf("%s:%d", haproxyFile, d.line)
		switch {
		case d.fields[0] == "retry-on":
			retryOn++
			retryOnConditions(t, where, d.fields[1:])
		case d.code == "option redispatch":
			redispatch = true
		case d.fields[0] == "retries":
			n, err := strconv.Atoi(d.fields[len(d.fields)-1])
			retries = err == nil && n >= 1
		case d.fields[0] == "http-request" && slices.Contains(d.fields, "retry"):
			t.Errorf("%s: a rule that retries requests: %s", where, d.code)
		}
	}
	if retryOn == 0 {
		t.Errorf("%s has no retry-on line: state `retry-on conn-failure`", haproxyFile)
	}
	if !redispatch || !retries {
		t.Errorf("%s needs `option redispatch` and `retries N` (N >= 1): a refused connection goes to another instance", haproxyFile)
	}
}

// TestE2ELoadBalancerUsesTheShippedHAProxyRules: the e2e tests run HAProxy
// with the shipped file itself (lbConfig reads deploy/haproxy.cfg and
// replaces only addresses, the relay's socket and the servers), so every
// rule tested there is the one that ships; no copy of a rule may creep
// back into the test.
func TestE2ELoadBalancerUsesTheShippedHAProxyRules(t *testing.T) {
	b, err := os.ReadFile(e2eLBTest)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if !strings.Contains(src, `filepath.Join("..", "deploy", "haproxy.cfg")`) {
		t.Errorf("%s does not read deploy/haproxy.cfg", e2eLBTest)
	}
	for _, directive := range []string{"http-error ", "retry-on ", "unique-id-format ", "http-request "} {
		if strings.Contains(src, "    "+directive) {
			t.Errorf("%s writes its own %q lines: the shipped file's must be what is tested", e2eLBTest, strings.TrimSpace(directive))
		}
	}
	ds := haproxyDirectives(t, haproxyFile)
	// The front door replaces the request id and drops a client's trace
	// headers (the BFF believes neither from a client).
	stripped := map[string]bool{}
	requestID := false
	for _, d := range ds {
		requestID = requestID || isRequestIDHeaderRule(d)
		if len(d.fields) >= 3 && d.fields[0] == "http-request" && d.fields[1] == "del-header" {
			stripped[strings.ToLower(d.fields[2])] = true
		}
	}
	if !requestID {
		t.Errorf("%s sets no X-Request-Id", haproxyFile)
	}
	for _, h := range []string{"traceparent", "tracestate", "baggage"} {
		if !stripped[h] {
			t.Errorf("%s does not drop a client's %s", haproxyFile, h)
		}
	}
	n := 0
	for _, d := range ds {
		switch d.fields[0] {
		case "retry-on":
			retryOnConditions(t, fmt.Sprintf("%s:%d", haproxyFile, d.line), d.fields[1:])
			n++
		case "unique-id-format", "http-error":
			n++
		}
	}
	if n < 5 {
		t.Errorf("found only %d retry-on, unique-id and http-error lines in %s", n, haproxyFile)
	}
}

// streamHeartbeat is how often the BFF writes a comment line on an open
// event stream (GET /bff/events), so that no proxy sees it idle.
const streamHeartbeat = 15 * time.Second

// haproxyDuration parses an HAProxy time: a number with an optional unit
// (us, ms, s, m, h, d); milliseconds without one.
func haproxyDuration(s string) (time.Duration, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, "ms"
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	u, ok := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second,
		"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[unit]
	if !ok {
		return 0, fmt.Errorf("time %q: unknown unit %q", s, unit)
	}
	return time.Duration(n) * u, nil
}

// TestHAProxyKeepsEventStreamsOpen: an event stream is silent but for the
// BFF's heartbeat, so every inactivity timeout on its way (timeout client of
// each frontend, timeout server of each backend, and timeout tunnel should
// one be set) is at least twice the heartbeat: one lost heartbeat never cuts
// a stream. Nothing may hold a response back (compression) or keep it (a
// cache), a reload must not cut a request still in flight, and an instance
// marked down must keep its connections (it closes its streams itself).
func TestHAProxyKeepsEventStreamsOpen(t *testing.T) {
	ds := haproxyDirectives(t, haproxyFile)
	defaults := map[string]time.Duration{}
	own := map[string]map[string]time.Duration{} // section -> timeout name -> value
	var sections []string
	var hardStop time.Duration
	for _, d := range ds {
		where := fmt.Sprintf("%s:%d", haproxyFile, d.line)
		kind := strings.Fields(d.section)[0]
		if d.code == d.section && (kind == "frontend" || kind == "backend" || kind == "listen") {
			sections = append(sections, d.section)
			own[d.section] = map[string]time.Duration{}
		}
		switch {
		case d.fields[0] == "timeout" && len(d.fields) == 3:
			v, err := haproxyDuration(d.fields[2])
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if kind == "defaults" {
				defaults[d.fields[1]] = v
			} else if own[d.section] != nil {
				own[d.section][d.fields[1]] = v
			}
		case d.fields[0] == "hard-stop-after" && len(d.fields) == 2:
			v, err := haproxyDuration(d.fields[1])
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			hardStop = v
		case d.fields[0] == "compression",
			d.fields[0] == "filter" && len(d.fields) > 1 && (d.fields[1] == "compression" || d.fields[1] == "cache"),
			slices.Contains(d.fields, "cache-store"), slices.Contains(d.fields, "cache-use"),
			kind == "cache":
			t.Errorf("%s: %s: it would hold back or keep an event stream", where, d.code)
		case slices.Contains(d.fields, "on-marked-down") || slices.Contains(d.fields, "on-marked-up"):
			t.Errorf("%s: %s: cutting an instance's sessions would cut its in-flight payments too", where, d.code)
		}
	}
	effective := func(sec, name string) (time.Duration, bool) {
		if v, ok := own[sec][name]; ok {
			return v, true
		}
		v, ok := defaults[name]
		return v, ok
	}
	var longestServer time.Duration
	checked := 0
	for _, sec := range sections {
		kind := strings.Fields(sec)[0]
		var names []string
		if kind != "backend" {
			names = append(names, "client")
		}
		if kind != "frontend" {
			names = append(names, "server")
		}
		if _, ok := effective(sec, "tunnel"); ok && kind != "frontend" {
			names = append(names, "tunnel")
		}
		for _, name := range names {
			v, ok := effective(sec, name)
			if !ok {
				t.Errorf("%s: no timeout %s: HAProxy would warn and wait forever", sec, name)
				continue
			}
			checked++
			if v < 2*streamHeartbeat {
				t.Errorf("%s: timeout %s %v < 2x the event stream heartbeat (%v): one late heartbeat would cut a stream", sec, name, v, streamHeartbeat)
			}
			if name == "server" {
				longestServer = max(longestServer, v)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("checked only %d inactivity timeouts in %s", checked, haproxyFile)
	}
	if hardStop == 0 {
		t.Errorf("%s: no hard-stop-after: after a reload, old processes would keep their event streams (and stay) forever", haproxyFile)
	} else if hardStop <= longestServer {
		t.Errorf("%s: hard-stop-after %v <= the longest timeout server %v: a reload could cut a payment still in flight", haproxyFile, hardStop, longestServer)
	}
}
