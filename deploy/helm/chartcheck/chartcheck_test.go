package chartcheck

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "write the plain manifests in deploy/kubernetes from the chart")

const (
	chartDir       = "../bff"
	productionFile = "../bff/values-production.yaml"
	plainDir       = "../../kubernetes"
	alertsFile     = "../../prometheus/alerts.yaml"
	namespace      = "bff"
)

// plainRelease is what the plain manifests are rendered as: release "bff",
// applied with kubectl (kustomize sets the namespace), with the selector of
// the manifests that came before the chart, so that an install made from
// them upgrades in place (TestPlainManifestsUpgradeInPlace).
var (
	plainRelease = Release{Name: "bff", Namespace: namespace, Service: "kubectl"}
	plainValues  = map[string]any{"nameOnlySelector": true}
)

// handWritten are the files of deploy/kubernetes that are not rendered from
// the chart: the chart never creates a Namespace or a Secret.
var handWritten = []string{"kustomization.yaml", "namespace.yaml", "secret.yaml"}

// crds are the Prometheus Operator's CustomResourceDefinitions of the
// release whose Go types go.mod names (v0.85.0), copied from its module
// (github.com/prometheus-operator/prometheus-operator@v0.85.0,
// example/prometheus-operator-crd; sha256 in testdata/crds/SHA256SUMS).
var crds = sync.OnceValues(func() (CRDs, error) {
	sums, err := os.ReadFile("testdata/crds/SHA256SUMS")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(sums)) {
		sum, file, _ := strings.Cut(strings.TrimSpace(line), "  ")
		b, err := os.ReadFile(filepath.Join("testdata/crds", file))
		if err != nil {
			return nil, err
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != sum {
			return nil, fmt.Errorf("testdata/crds/%s was changed: sha256 %s, want %s", file, got, sum)
		}
	}
	return LoadCRDs("testdata/crds/monitoring.coreos.com_servicemonitors.yaml",
		"testdata/crds/monitoring.coreos.com_prometheusrules.yaml")
})

func loadCRDs(t *testing.T) CRDs {
	t.Helper()
	c, err := crds()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func productionValues(t *testing.T) map[string]any {
	t.Helper()
	v, err := ReadValues(productionFile)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func renderObjs(t *testing.T, values map[string]any, rel Release) []Object {
	t.Helper()
	ms, err := Render(chartDir, values, rel)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(ms)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kinds(objs []Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Kind)
	}
	slices.Sort(ks)
	return ks
}

func find(t *testing.T, objs []Object, kind string) Object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind {
			return o
		}
	}
	t.Fatalf("no %s rendered", kind)
	return Object{}
}

// get walks a decoded YAML value by map keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// ---------------------------------------------------------------- helm lint

// TestLint: helm lint, for the oldest Kubernetes the chart allows
// (Chart.yaml's kubeVersion) and the one the objects are validated for.
func TestLint(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"default values":    nil,
		"production values": productionValues(t),
	} {
		for _, kv := range []string{"v1.30.0", KubeVersion} {
			t.Run(name+" "+kv, func(t *testing.T) {
				msgs, err := Lint(chartDir, values, namespace, kv)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs {
					t.Error(m)
				}
			})
		}
	}
}

// TestTemplatesReadOnlyDefinedValues: rendered strictly (a value the
// values do not define is an error, as with helm lint --strict).
func TestTemplatesReadOnlyDefinedValues(t *testing.T) {
	for _, values := range []map[string]any{nil, productionValues(t)} {
		if _, err := RenderStrict(chartDir, values, Release{Name: "bff", Namespace: namespace}); err != nil {
			t.Error(err)
		}
	}
}

// ---------------------------------------------------------- helm template

// TestRenderedObjectsValidate: every object the chart renders, with the
// default and with the production values, is one the API server would
// accept without a warning.
func TestRenderedObjectsValidate(t *testing.T) {
	crds := loadCRDs(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
		rel    Release
		want   []string
	}{
		{"default values", nil, Release{Name: "bff", Namespace: namespace},
			[]string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget", "Service", "Service", "ServiceAccount"}},
		{"production values", productionValues(t), Release{Name: "payments-bff", Namespace: "payments"},
			[]string{"ConfigMap", "ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Ingress", "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "Service", "Service", "ServiceAccount", "ServiceMonitor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderObjs(t, tc.values, tc.rel)
			if got := kinds(objs); !slices.Equal(got, tc.want) {
				t.Errorf("rendered %v, want %v", got, tc.want)
			}
			for _, o := range objs {
				if err := Validate(o, tc.rel.Namespace, crds); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestValidatorRefusesBrokenObjects: each check above can fail. Every case
// is a rendered object with one mistake a chart author could make.
func TestValidatorRefusesBrokenObjects(t *testing.T) {
	crds := loadCRDs(t)
	objs := renderObjs(t, productionValues(t), Release{Name: "bff", Namespace: namespace})
	for _, tc := range []struct {
		name, kind, old, new, want string
	}{
		{"unknown field", "Deployment", "revisionHistoryLimit:", "revisionHistoryLimits:", "unknown field"},
		{"duplicate field", "Service", "  type: ClusterIP\n", "  type: ClusterIP\n  type: NodePort\n", "already set"},
		{"selector does not match the pod labels", "Deployment", "      app.kubernetes.io/instance: bff\n  template:", "      app.kubernetes.io/instance: other\n  template:", "`selector` does not match template `labels`"},
		{"port out of range", "Service", "port: 9090\n", "port: 90000\n", "must be between 1 and 65535"},
		{"bad enum", "Service", "protocol: TCP", "protocol: TPC", "Unsupported value"},
		{"bad quantity", "Deployment", "memory: 768Mi", "memory: 768MB-", "quantities must match"},
		{"maxReplicas below minReplicas", "HorizontalPodAutoscaler", "maxReplicas: ", "maxReplicas: 1 #", "must be greater than or equal to `minReplicas`"},
		{"PDB with both minAvailable and maxUnavailable", "PodDisruptionBudget", "  maxUnavailable: 1\n", "  maxUnavailable: 1\n  minAvailable: 1\n", "minAvailable and maxUnavailable cannot be both set"},
		{"bad CIDR", "NetworkPolicy", "cidr: 0.0.0.0/0", "cidr: 0.0.0.0/33", "CIDR"},
		{"Ingress path type", "Ingress", "pathType: Prefix", "pathType: Prefixed", "Unsupported value"},
		{"deprecated node label warns", "Deployment", "      serviceAccountName:", "      nodeSelector: {beta.kubernetes.io/arch: amd64}\n      serviceAccountName:", "deprecated"},
		{"ServiceMonitor unknown field", "ServiceMonitor", "jobLabel:", "jobLabels:", "unknown field"},
		{"ServiceMonitor bad duration", "ServiceMonitor", "interval: 30s", "interval: 30 seconds", "interval"},
		{"PrometheusRule bad duration", "PrometheusRule", "for: 3m", "for: three minutes", "for"},
		{"custom resource with a bad name", "PrometheusRule", "name: bff\n", "name: Bff_Rules\n", "metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := find(t, objs, tc.kind)
			raw := string(o.Raw)
			if !strings.Contains(raw, tc.old) {
				t.Fatalf("%s has no %q:\n%s", tc.kind, tc.old, raw)
			}
			o.Raw = []byte(strings.Replace(raw, tc.old, tc.new, 1))
			if err := Validate(o, namespace, crds); err == nil {
				t.Errorf("accepted:\n%s", o.Raw)
			} else if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused, but not for %q: %v", tc.want, err)
			} else {
				t.Log(err)
			}
		})
	}
}

// -------------------------------------------------- one source of truth

// TestPlainManifestsAreTheChart: deploy/kubernetes is the chart rendered
// with its default values (and the selector of the manifests before it). `make manifests` (this test with -update)
// writes them.
func TestPlainManifestsAreTheChart(t *testing.T) {
	ms, err := Render(chartDir, plainValues, plainRelease)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, m := range ms {
		name := filepath.Base(m.Template)
		want[name] = []byte(plainHeader(m.Template) + strings.TrimLeft(m.Content, "\n"))
	}
	if *update {
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(plainDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(plainDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if slices.Contains(handWritten, name) {
			continue
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("%s is not rendered from the chart: add a template for it, or list it in handWritten", f)
			continue
		}
		if !bytes.Equal(got, w) {
			t.Errorf("%s differs from the chart's rendering: run `make manifests`\n--- want\n%s", f, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s is missing: run `make manifests`", filepath.Join(plainDir, name))
	}
}

func plainHeader(template string) string {
	return "# Rendered from the Helm chart (deploy/helm/bff/" + template + ", default values and\n" +
		"# nameOnlySelector: true) by\n" +
		"# `make manifests`. Do not edit: change the chart, then run `make manifests`.\n"
}

// TestPlainManifestsKustomization: kustomization.yaml lists every rendered
// file, and every file it lists exists.
func TestPlainManifestsKustomization(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(plainDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	ms, err := Render(chartDir, plainValues, plainRelease)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if !slices.Contains(k.Resources, filepath.Base(m.Template)) {
			t.Errorf("kustomization.yaml does not list %s", filepath.Base(m.Template))
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(plainDir, r)); err != nil {
			t.Error(err)
		}
	}
}

// ---------------------------------------------------------- the objects

// TestPrometheusRuleIsTheAlertsFile: the PrometheusRule carries the alerting
// rules of deploy/prometheus/alerts.yaml unchanged; in particular Helm does
// not expand their {{ $labels }} templates.
func TestPrometheusRuleIsTheAlertsFile(t *testing.T) {
	rule := find(t, renderObjs(t, productionValues(t), Release{Name: "bff", Namespace: namespace}), "PrometheusRule")
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var alerts map[string]any
	if err := yaml.Unmarshal(b, &alerts); err != nil {
		t.Fatal(err)
	}
	if len(get(alerts, "groups").([]any)) == 0 {
		t.Fatal("no groups in " + alertsFile)
	}
	if !reflect.DeepEqual(get(rule.Body, "spec", "groups"), alerts["groups"]) {
		t.Errorf("the PrometheusRule's groups differ from %s", alertsFile)
	}
	if !strings.Contains(string(rule.Raw), "{{ $labels.instance }}") {
		t.Error("the alerts' {{ $labels }} templates did not survive rendering")
	}
}

// TestDashboardConfigMapIsTheDashboard: the sidecar's ConfigMap carries
// deploy/grafana/bff-dashboard.json unchanged, with the sidecar's label.
func TestDashboardConfigMapIsTheDashboard(t *testing.T) {
	var cm Object
	for _, o := range renderObjs(t, productionValues(t), Release{Name: "bff", Namespace: namespace}) {
		if o.Kind == "ConfigMap" && strings.HasSuffix(o.Name, "-dashboard") {
			cm = o
		}
	}
	if cm.Name == "" {
		t.Fatal("no dashboard ConfigMap")
	}
	if get(cm.Body, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Error("the ConfigMap lacks the sidecar's label grafana_dashboard: \"1\"")
	}
	b, err := os.ReadFile("../../grafana/bff-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(get(cm.Body, "data", "bff-dashboard.json").(string)), &got); err != nil {
		t.Fatalf("the ConfigMap's dashboard is not JSON: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the ConfigMap's dashboard differs from deploy/grafana/bff-dashboard.json")
	}
}

// TestServiceMonitorScrapesTheAlertsJob: the alerts select job="bff"; the
// ServiceMonitor names the job after the admin Service's
// app.kubernetes.io/part-of label and selects only that Service.
func TestServiceMonitorScrapesTheAlertsJob(t *testing.T) {
	objs := renderObjs(t, productionValues(t), Release{Name: "payments-bff", Namespace: "payments"})
	sm := find(t, objs, "ServiceMonitor")
	label, _ := get(sm.Body, "spec", "jobLabel").(string)
	selector, _ := get(sm.Body, "spec", "selector", "matchLabels").(map[string]any)
	var matched []Object
	for _, o := range objs {
		if o.Kind != "Service" {
			continue
		}
		labels, _ := get(o.Body, "metadata", "labels").(map[string]any)
		all := true
		for k, v := range selector {
			all = all && labels[k] == v
		}
		if all {
			matched = append(matched, o)
		}
	}
	if len(matched) != 1 || get(matched[0].Body, "spec", "ports", 0, "name") != get(sm.Body, "spec", "endpoints", 0, "port") {
		t.Fatalf("the ServiceMonitor selects %d Services, want the admin Service alone", len(matched))
	}
	if job := get(matched[0].Body, "metadata", "labels", label); job != "bff" {
		t.Errorf("the scrape job would be %v, the alerts select job=\"bff\"", job)
	}
}

// TestIngressRoutesTheBFFOnTheAppHost: /auth, /api and /bff of the app's
// host go to the BFF's public Service, never to the admin one, with TLS.
func TestIngressRoutesTheBFFOnTheAppHost(t *testing.T) {
	values := productionValues(t)
	objs := renderObjs(t, values, Release{Name: "payments-bff", Namespace: "payments"})
	ing := find(t, objs, "Ingress")
	cm := find(t, objs, "ConfigMap")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(get(cm.Body, "data", "config.yaml").(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	host := get(ing.Body, "spec", "rules", 0, "host")
	if want := strings.TrimPrefix(cfg["public_url"].(string), "https://"); host != want {
		t.Errorf("the Ingress host is %v, config.public_url's host is %s: the cookie would not be first-party", host, want)
	}
	if get(ing.Body, "spec", "tls", 0, "hosts", 0) != host {
		t.Error("no TLS for the host")
	}
	routed := map[string]any{}
	for _, p := range get(ing.Body, "spec", "rules", 0, "http", "paths").([]any) {
		routed[get(p, "path").(string)] = get(p, "backend", "service", "name")
	}
	for _, p := range []string{"/auth", "/api", "/bff"} {
		if routed[p] != "payments-bff" {
			t.Errorf("%s goes to %v, want the BFF's public Service payments-bff", p, routed[p])
		}
	}
}

// streamHeartbeat is how often the BFF writes a comment line on an open
// event stream (GET /bff/events), so that no proxy sees it idle.
const streamHeartbeat = 15 // seconds

// TestIngressKeepsEventStreamsOpen: GET /bff/events is an event stream that
// stays open as long as the app; ingress-nginx must not cut it while the
// BFF's heartbeat flows (its read and send timeouts are idle times, kept far
// above twice the heartbeat) nor hold its events in a buffer. The
// annotations are defaults: a team's own add to them.
func TestIngressKeepsEventStreamsOpen(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"production values":       productionValues(t),
		"an annotation of a team": {"ingress": map[string]any{"enabled": true, "host": "app.example.com", "annotations": map[string]any{"cert-manager.io/cluster-issuer": "letsencrypt"}}},
	} {
		t.Run(name, func(t *testing.T) {
			ing := find(t, renderObjs(t, values, Release{Name: "bff", Namespace: namespace}), "Ingress")
			ann, _ := get(ing.Body, "metadata", "annotations").(map[string]any)
			for _, k := range []string{"proxy-read-timeout", "proxy-send-timeout"} {
				v, _ := ann["nginx.ingress.kubernetes.io/"+k].(string)
				n, err := strconv.Atoi(v)
				if err != nil || n < 3600 {
					t.Errorf("nginx.ingress.kubernetes.io/%s = %q, want >= 3600 (seconds; far above 2 x the %ds heartbeat)", k, v, streamHeartbeat)
				}
			}
			if v := ann["nginx.ingress.kubernetes.io/proxy-buffering"]; v != "off" {
				t.Errorf("nginx.ingress.kubernetes.io/proxy-buffering = %v, want off", v)
			}
			if name != "production values" && ann["cert-manager.io/cluster-issuer"] != "letsencrypt" {
				t.Error("the team's own annotation is lost")
			}
		})
	}
}

// TestWebhookPathIsRoutedAndSigned: with config.payments.webhook_path set,
// the Ingress routes exactly that path to the BFF, and the signing secrets
// come from the Secret as BFF_PAYMENTS_WEBHOOK_SECRETS, never from values.
func TestWebhookPathIsRoutedAndSigned(t *testing.T) {
	values := productionValues(t)
	values["config"].(map[string]any)["payments"] = map[string]any{"webhook_path": "/webhooks/payments"}
	values["secrets"].(map[string]any)["keys"].(map[string]any)["paymentsWebhookSecrets"] = "payments-webhook-secrets"
	objs := renderObjs(t, values, Release{Name: "payments-bff", Namespace: "payments"})
	found := false
	for _, p := range get(find(t, objs, "Ingress").Body, "spec", "rules", 0, "http", "paths").([]any) {
		if get(p, "path") == "/webhooks/payments" {
			found = true
			if get(p, "pathType") != "Exact" || get(p, "backend", "service", "name") != "payments-bff" {
				t.Errorf("the webhook path: %v, want Exact to the BFF's public Service payments-bff", p)
			}
		}
	}
	if !found {
		t.Error("the Ingress does not route config.payments.webhook_path")
	}
	c := get(find(t, objs, "Deployment").Body, "spec", "template", "spec", "containers", 0)
	env := false
	for _, e := range get(c, "env").([]any) {
		if get(e, "name") == "BFF_PAYMENTS_WEBHOOK_SECRETS" {
			env = get(e, "valueFrom", "secretKeyRef", "key") == "payments-webhook-secrets"
		}
	}
	if !env {
		t.Error("no BFF_PAYMENTS_WEBHOOK_SECRETS from the Secret's key payments-webhook-secrets")
	}
}

// TestNotesNameEveryRoutedPath: what `helm install` prints says which paths
// of the app's host go to the BFF, with or without the chart's Ingress: the
// Ingress's paths (/bff among them: the payments list and the event
// stream) and config.payments.webhook_path when set.
func TestNotesNameEveryRoutedPath(t *testing.T) {
	for _, tc := range []struct {
		name    string
		values  string
		webhook bool
	}{
		{"no Ingress", `{}`, false},
		{"no Ingress, webhooks", `{config: {payments: {webhook_path: /webhooks/payments}}, secrets: {keys: {paymentsWebhookSecrets: payments-webhook-secrets}}}`, true},
		{"the Ingress", `{ingress: {enabled: true, host: app.example.com}}`, false},
		{"the Ingress, webhooks", `{ingress: {enabled: true, host: app.example.com}, config: {payments: {webhook_path: /webhooks/payments}}, secrets: {keys: {paymentsWebhookSecrets: payments-webhook-secrets}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			notes, err := Notes(chartDir, values, Release{Name: "bff", Namespace: namespace})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"/auth", "/api", "/bff"}
			if tc.webhook {
				want = append(want, "/webhooks/payments")
			}
			for _, p := range want {
				// A path of its own, not part of a name (svc/bff-admin).
				if !regexp.MustCompile(`(?m)(^|[\s,(])` + regexp.QuoteMeta(p) + `([\s,.)]|$)`).MatchString(notes) {
					t.Errorf("NOTES.txt does not name %s:\n%s", p, notes)
				}
			}
		})
	}
}

// TestSecretsComeFromTheExistingSecret: no rendered object carries a secret
// value; the Deployment takes each one from the Secret the values name.
func TestSecretsComeFromTheExistingSecret(t *testing.T) {
	values := productionValues(t)
	secret := get(values, "secrets", "existingSecret")
	for _, o := range renderObjs(t, values, Release{Name: "bff", Namespace: namespace}) {
		if o.Kind == "Secret" {
			t.Errorf("the chart renders a Secret (%s): secrets are referenced, never created", o.Name)
		}
		if o.Kind != "Deployment" {
			continue
		}
		c := get(o.Body, "spec", "template", "spec", "containers", 0)
		for _, e := range get(c, "env").([]any) {
			name := get(e, "name").(string)
			if strings.HasPrefix(name, "BFF_") {
				if ref := get(e, "valueFrom", "secretKeyRef", "name"); ref != secret {
					t.Errorf("%s does not come from the Secret %v", name, secret)
				}
			}
		}
		for _, v := range get(o.Body, "spec", "template", "spec", "volumes").([]any) {
			if get(v, "name") == "upstream-secret" && get(v, "secret", "secretName") != secret {
				t.Errorf("the upstream client secret's volume is not the Secret %v", secret)
			}
		}
	}
}

// TestTheBFFAcceptsTheConfig: the config file and the environment the chart
// gives the BFF, with and without the production values, pass the BFF's own
// start-up check (`bff -check`), with stand-ins for the Secret's values and
// its mounted files.
func TestTheBFFAcceptsTheConfig(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bff")
	build := exec.Command(goTool(), "build", "-o", bin, "./cmd/bff")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/bff: %v\n%s", err, out)
	}
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // base64 of 32 bytes
	// A webhook secret of this run's own: production refuses one printed in
	// the repository (the Standard Webhooks example, the simulator's).
	hookKey := make([]byte, 32)
	_, _ = rand.Read(hookKey)
	standIns := map[string]string{
		"BFF_REDIS_URL":                "redis://127.0.0.1:6379/0",
		"BFF_REDIS_ENCRYPTION_KEY":     key,
		"BFF_SESSION_KEYS":             `["` + key + `"]`,
		"BFF_AUTH_OIDC_CLIENT_SECRET":  "oidc-client-secret",
		"BFF_LEDGER_POSTGRES_URL":      "postgres://bff:pw@127.0.0.1:5432/bff?sslmode=verify-full",
		"BFF_PAYMENTS_WEBHOOK_SECRETS": `["whsec_` + base64.StdEncoding.EncodeToString(hookKey) + `"]`,
	}
	files := map[string]string{ // a mounted file: its stand-in
		"/run/secrets/bff/upstream_client_secret": "upstream-client-secret",
		"/run/secrets/bff/admin_token":            "an-admin-token-of-32-characters!",
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		ok     bool
	}{
		{"default values", nil, true},
		{"production values", productionValues(t), true},
		{"webhooks on", map[string]any{
			"config":  map[string]any{"payments": map[string]any{"webhook_path": "/webhooks/payments"}},
			"secrets": map[string]any{"keys": map[string]any{"paymentsWebhookSecrets": "payments-webhook-secrets"}},
		}, true},
		// The check can fail: production refuses a cookie without Secure.
		{"a refused config", map[string]any{"config": map[string]any{"session": map[string]any{"secure_cookie": false}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderObjs(t, tc.values, Release{Name: "bff", Namespace: namespace})
			cfg := get(find(t, objs, "ConfigMap").Body, "data", "config.yaml").(string)
			for path, content := range files {
				local := filepath.Join(dir, filepath.Base(path))
				if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				cfg = strings.ReplaceAll(cfg, path, local)
			}
			cfgFile := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-config", cfgFile, "-check")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			c := get(find(t, objs, "Deployment").Body, "spec", "template", "spec", "containers", 0)
			for _, e := range get(c, "env").([]any) {
				name := get(e, "name").(string)
				if v, ok := get(e, "value").(string); ok {
					cmd.Env = append(cmd.Env, name+"="+v)
					continue
				}
				if get(e, "valueFrom", "fieldRef") != nil {
					cmd.Env = append(cmd.Env, name+"=bff-0")
					continue
				}
				v, ok := standIns[name]
				if !ok {
					t.Fatalf("no stand-in for %s", name)
				}
				cmd.Env = append(cmd.Env, name+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if tc.ok && err != nil {
				t.Errorf("bff -check refuses the chart's config: %v\n%s", err, out)
			}
			if !tc.ok && err == nil {
				t.Errorf("bff -check accepted a config it should refuse:\n%s", cfg)
			}
		})
	}
}

// goTool is the go command: make's $(GO) (test-chart passes it as GO), else
// the one on PATH.
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// --------------------------------------------------------------- upgrades

// byKey indexes objects by kind and name, as an update finds its object.
func byKey(objs []Object) map[string]Object {
	m := map[string]Object{}
	for _, o := range objs {
		m[o.key()] = o
	}
	return m
}

func (o Object) key() string { return o.Kind + "/" + o.Name }

// readObjects reads the objects of YAML files.
func readObjects(t *testing.T, files []string) map[string]Object {
	t.Helper()
	var objs []Object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Objects([]Manifest{{Template: f, Content: string(b)}})
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, got...)
	}
	return byKey(objs)
}

// TestPlainManifestsUpgradeInPlace: the manifests of deploy/kubernetes as
// they were before the chart (testdata/previous) update in place to the
// chart's rendering: no field that cannot change (a Deployment's selector)
// changes.
func TestPlainManifestsUpgradeInPlace(t *testing.T) {
	crds := loadCRDs(t)
	files, _ := filepath.Glob("testdata/previous/*.yaml")
	if len(files) != 8 {
		t.Fatalf("want the 8 previous manifests, got %v", files)
	}
	prev := readObjects(t, files)
	for _, o := range renderObjs(t, plainValues, plainRelease) {
		old, ok := prev[o.key()]
		if !ok {
			t.Errorf("%s %s is new", o.Kind, o.Name)
			continue
		}
		if err := ValidateUpdate(old, o, namespace, crds); err != nil {
			t.Error(err)
		}
	}
}

// TestHelmUpgrade: a release installed with the default values upgrades to
// the production values, and back, in place.
func TestHelmUpgrade(t *testing.T) {
	crds := loadCRDs(t)
	rel := Release{Name: "bff", Namespace: namespace}
	def, prod := renderObjs(t, nil, rel), renderObjs(t, productionValues(t), rel)
	updated := 0
	for _, pair := range [][2][]Object{{def, prod}, {prod, def}} {
		before := byKey(pair[0])
		for _, o := range pair[1] {
			if old, ok := before[o.key()]; ok {
				updated++
				if err := ValidateUpdate(old, o, namespace, crds); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if updated < 16 {
		t.Errorf("only %d objects were updated", updated)
	}
}

// TestValidateUpdateRefusesASelectorChange: the update check can fail.
func TestValidateUpdateRefusesASelectorChange(t *testing.T) {
	crds := loadCRDs(t)
	rel := Release{Name: "bff", Namespace: namespace}
	old := find(t, renderObjs(t, map[string]any{"nameOnlySelector": true}, rel), "Deployment")
	o := find(t, renderObjs(t, nil, rel), "Deployment")
	err := ValidateUpdate(old, o, namespace, crds)
	if err == nil || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("a changed selector: %v, want field is immutable", err)
	}
}

// ---------------------------------------------------------- combinations

// TestValueCombinations: values a team would set render objects the API
// server accepts; values that would break quietly are refused, by
// values.schema.json or at render time (or by the validation), with a
// message that names the value and never repeats a secret.
func TestValueCombinations(t *testing.T) {
	crds := loadCRDs(t)
	monitoring := `[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]`
	good := map[string]string{
		"autoscaling off":        `{autoscaling: {enabled: false}, replicaCount: 4}`,
		"no NetworkPolicy":       `{networkPolicy: {enabled: false}, otel: {enabled: true, endpoint: "http://c:4318"}}`,
		"no PDB":                 `{podDisruptionBudget: {enabled: false}}`,
		"own ServiceAccount":     `{serviceAccount: {create: false, name: bff-runner}}`,
		"fullnameOverride":       `{fullnameOverride: payments-bff}`,
		"nameOverride":           `{nameOverride: web-bff, serviceMonitor: {enabled: true}}`,
		"Sentinel":               `{secrets: {keys: {redisURL: "", redisPassword: redis-password, redisSentinelPassword: sentinel-password}}, config: {redis: {sentinel: {master: mymaster, addrs: ["sentinel.redis.svc:26379"]}}}}`,
		"dev login":              `{config: {env: development, auth: {mode: dev}, session: {secure_cookie: false}, public_url: "http://localhost:8080"}, secrets: {keys: {oidcClientSecret: "", ledgerPostgresURL: ""}}}`,
		"tracing to a collector": `{otel: {enabled: true, endpoint: "http://otel.monitoring.svc:4318", samplerArg: 0.05, headersSecret: {name: otel-auth, key: headers}, networkPolicyTo: ` + monitoring + `}}`,
		"tracing to a SaaS":      `{otel: {enabled: true, endpoint: "https://otlp.vendor.example", headersSecret: {name: otel-auth, key: headers}, networkPolicyTo: [{ipBlock: {cidr: 203.0.113.0/24}}], ports: [443]}}`,
		"Ingress with the app":   `{ingress: {enabled: true, host: app.example.com, appBackend: {name: web, port: {number: 80}}}}`,
		"the app in the image":   `{image: {repository: registry.example.com/team/app-with-bff, tag: "1.0.0"}, ingress: {enabled: true, host: app.example.com, paths: [/]}, config: {payments: {webhook_path: /webhooks/payments}}, secrets: {keys: {paymentsWebhookSecrets: payments-webhook-secrets}}}`,
		"Ingress, public_url with its port and capitals": `{ingress: {enabled: true, host: app.example.com}, config: {public_url: "https://App.Example.com:443"}}`,
		"nodelocal DNS":                 `{networkPolicy: {dnsTo: [{ipBlock: {cidr: 169.254.20.10/32}}]}}`,
		"decryption keys":               `{extraEnv: [{name: BFF_REDIS_DECRYPTION_KEYS, valueFrom: {secretKeyRef: {name: bff-secrets, key: old-keys}}}]}`,
		"a harmless extra":              `{extraEnv: [{name: BFF_LOG_LEVEL, value: debug}, {name: TZ, value: UTC}]}`,
		"a scrape interval":             `{serviceMonitor: {enabled: true, interval: 1m30s}}`,
		"a longer drain":                `{config: {shutdown_timeout: 1m}, terminationGracePeriodSeconds: 75}`,
		"no delay":                      `{config: {shutdown_delay: "0"}}`,
		"no admin token, said":          `{secrets: {keys: {adminToken: ""}}, config: {admin_mutations_disabled: true}}`,
		"an extra egress":               `{networkPolicy: {extraEgress: [{to: [{ipBlock: {cidr: 198.51.100.0/24}}], ports: [{protocol: TCP, port: 8443}]}]}}`,
		"the dashboard":                 `{grafanaDashboard: {enabled: true, label: grafana.io/dashboard, folder: Payments}}`,
		"payment webhooks":              `{config: {payments: {webhook_path: /webhooks/payments}}, secrets: {keys: {paymentsWebhookSecrets: payments-webhook-secrets}}, ingress: {enabled: true, host: app.example.com}}`,
		"fewer streams, slower polls":   `{config: {payments: {watch_interval: 5s, watch_max_interval: 1m}, limits: {streams_per_user: 2}}}`,
		"no nginx buffering annotation": `{ingress: {enabled: true, host: app.example.com, annotations: {nginx.ingress.kubernetes.io/proxy-buffering: null}}}`,
	}
	for name, v := range good {
		t.Run(name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(v), &values); err != nil {
				t.Fatal(err)
			}
			objs := renderObjs(t, values, Release{Name: "release-1", Namespace: "team"})
			for _, o := range objs {
				if err := Validate(o, "team", crds); err != nil {
					t.Error(err)
				}
			}
		})
	}
	bad := []struct{ name, values, want string }{
		{"no ingress peers", `{networkPolicy: {ingressFrom: []}}`, "ingressFrom"},
		{"null ingress peers", `{networkPolicy: {ingressFrom: null}}`, "ingressFrom"},
		{"no Redis peers", `{redis: {networkPolicyTo: []}}`, "/redis/networkPolicyTo"},
		{"no Redis ports", `{redis: {ports: []}}`, "/redis/ports"},
		{"null Redis ports", `{redis: {ports: null}}`, "redis.ports"},
		{"null PostgreSQL peers", `{postgres: {networkPolicyTo: null}}`, "postgres.networkPolicyTo"},
		{"an allow-all extra egress", `{networkPolicy: {extraEgress: [{to: [], ports: []}]}}`, "extraEgress"},
		{"an empty extra egress", `{networkPolicy: {extraEgress: [{}]}}`, "extraEgress"},
		{"tracing dropped by the NetworkPolicy", `{otel: {enabled: true, endpoint: "http://otel.monitoring.svc:4318"}}`, "otel.networkPolicyTo"},
		{"tracing over https, still dropped", `{otel: {enabled: true, endpoint: "https://otel-collector.monitoring.svc"}}`, "otel.networkPolicyTo"},
		{"tracing without an endpoint", `{otel: {enabled: true, networkPolicyTo: [{podSelector: {}}]}}`, "otel.endpoint"},
		{"a grace period shorter than the drain", `{terminationGracePeriodSeconds: 10, config: {shutdown_timeout: 60s}}`, "terminationGracePeriodSeconds"},
		{"a drain longer than the grace period", `{config: {shutdown_timeout: 1m30s}}`, "terminationGracePeriodSeconds"},
		{"a fractional drain", `{config: {shutdown_timeout: 39.5s}}`, "shutdown_timeout"},
		{"a drain in nanoseconds", `{config: {shutdown_timeout: 40000000000ns}}`, "shutdown_timeout"},
		{"a bare number", `{config: {shutdown_timeout: 30}}`, "shutdown_timeout"},
		{"no room to flush traces", `{otel: {enabled: true, endpoint: "http://c:4318", networkPolicyTo: [{podSelector: {}}]}, terminationGracePeriodSeconds: 41}`, "terminationGracePeriodSeconds"},
		{"no encryption key in production", `{secrets: {keys: {redisEncryptionKey: ""}}}`, "redisEncryptionKey"},
		{"no session keys in production", `{secrets: {keys: {sessionKeys: ""}}}`, "sessionKeys"},
		{"no ledger in production", `{secrets: {keys: {ledgerPostgresURL: ""}}}`, "ledgerPostgresURL"},
		{"no admin token in production, unsaid", `{secrets: {keys: {adminToken: ""}}}`, "adminToken"},
		{"no Redis at all", `{secrets: {keys: {redisURL: ""}}}`, "redisURL"},
		{"a Redis URL and Sentinel", `{config: {redis: {sentinel: {master: m, addrs: ["s:26379"]}}}}`, "redisURL"},
		{"a Redis URL and Cluster", `{config: {redis: {cluster_addrs: ["c:6379"]}}}`, "redisURL"},
		{"an Ingress on another host", `{ingress: {enabled: true, host: evil.example.org}}`, "ingress.host"},
		{"a literal secret in extraEnv", `{extraEnv: [{name: BFF_REDIS_DECRYPTION_KEYS, value: "c2VjcmV0"}]}`, "extraEnv"},
		{"literal OTLP headers in extraEnv", `{extraEnv: [{name: OTEL_EXPORTER_OTLP_HEADERS, value: "api-key=c2VjcmV0"}]}`, "extraEnv"},
		{"a variable the chart sets", `{extraEnv: [{name: BFF_REDIS_URL, valueFrom: {secretKeyRef: {name: other, key: url}}}]}`, "extraEnv"},
		{"the environment through extraEnv", `{extraEnv: [{name: BFF_ENV, value: development}]}`, "extraEnv"},
		{"the drain through extraEnv", `{extraEnv: [{name: BFF_SHUTDOWN_TIMEOUT, value: 10m}]}`, "extraEnv"},
		{"a flow-mapping injection", `{otel: {enabled: true, endpoint: "http://c:4318", networkPolicyTo: [{podSelector: {}}], headersSecret: {name: "a, optional: true", key: h}}}`, "name"},
		{"a URL as the Secret's name", `{secrets: {existingSecret: "redis://:hunter2@x"}}`, "existingSecret"},
		{"webhooks without their secrets", `{config: {payments: {webhook_path: /webhooks/payments}}}`, "paymentsWebhookSecrets"},
		{"literal webhook secrets in extraEnv", `{extraEnv: [{name: BFF_PAYMENTS_WEBHOOK_SECRETS, value: "[c2VjcmV0]"}]}`, "extraEnv"},
		{"a PDB that blocks drains", `{podDisruptionBudget: {maxUnavailable: 0}}`, "maxUnavailable"},
		{"a dashboard label that is not a label", `{grafanaDashboard: {enabled: true, label: "a: b"}}`, "label"},
		// values.schema.json
		{"a secret value instead of a Secret's key", `{secrets: {keys: {redisURL: "redis://:hunter2@redis:6379/0"}}}`, "redisURL"},
		{"a secret in the config", `{config: {redis: {url: "redis://:hunter2@redis:6379/0"}}}`, "url"},
		{"the session keys in the config", `{config: {session: {keys: ["c2VjcmV0"]}}}`, "keys"},
		{"the ledger URL in the config", `{config: {ledger: {postgres_url: "postgres://bff:hunter2@db/bff"}}}`, "postgres_url"},
		{"webhook secrets in the config", `{config: {payments: {webhook_secrets: ["whsec_c2VjcmV0"]}}}`, "webhook_secrets"},
		{"a webhook path that is not a path", `{config: {payments: {webhook_path: "webhooks"}}, secrets: {keys: {paymentsWebhookSecrets: s}}}`, "webhook_path"},
		{"a poll interval that is not a duration", `{config: {payments: {watch_interval: 2}}}`, "watch_interval"},
		{"a negative stream cap", `{config: {limits: {streams_per_user: -1}}}`, "streams_per_user"},
		{"an unknown top-level value", `{replicas: 5}`, "replicas"},
		{"a misspelt value", `{ingress: {enabled: true, hosts: ["app.example.com"]}}`, "hosts"},
		{"no Secret", `{secrets: {existingSecret: ""}}`, "existingSecret"},
		{"too few pods", `{autoscaling: {minReplicas: 1}}`, "minReplicas"},
		{"a port out of range", `{ports: {http: 70000}}`, "http"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			ms, err := Render(chartDir, values, Release{Name: "bff", Namespace: namespace})
			if err == nil {
				objs, oerr := Objects(ms)
				err = oerr
				for _, o := range objs {
					if verr := Validate(o, namespace, crds); verr != nil {
						err = verr
					}
				}
			}
			if err == nil {
				t.Fatalf("rendered and validated with %s", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused, but the error does not name %q: %v", tc.want, err)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "c2VjcmV0") {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
}
