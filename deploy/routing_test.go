package deploy

// The routing examples of docs/deployment.md (nginx, HAProxy, Ingress, the
// CDN's list, the checklist) against the BFF's own route table: a path the
// BFF serves that a front leaves out reaches the app's server, whose
// single-page fallback answers GET /bff/events with index.html, and the
// upstream's webhooks are never taken.

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

const (
	deploymentDoc = "../docs/deployment.md"
	routesFile    = "../internal/edge/routes.go"
	// exampleWebhookPath is the payments.webhook_path the docs' examples
	// route (config.dev.yaml's, and the chart's comment's).
	exampleWebhookPath = "/webhooks/payments"
	eventsPath         = "/bff/events"
)

// bffRoutes reads the public routes of internal/edge/routes.go: each
// literal path, its parameters and wildcards filled in ("/bff/payments/x"),
// and their first segments ("/auth", "/api", "/bff"). The app's catch-all
// ("/*", static_dir) is not the BFF's.
func bffRoutes(t *testing.T) (paths, prefixes []string) {
	t.Helper()
	b, err := os.ReadFile(routesFile)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\be\.(?:GET|HEAD|POST|PUT|PATCH|DELETE|Any)\("(/[^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		p := m[1]
		if p == "/*" {
			continue
		}
		p = regexp.MustCompile(`:[^/]+|\*`).ReplaceAllString(p, "x")
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
		seg, _, _ := strings.Cut(p[1:], "/")
		if !slices.Contains(prefixes, "/"+seg) {
			prefixes = append(prefixes, "/"+seg)
		}
	}
	for _, want := range []string{"/auth", "/api", "/bff"} {
		if !slices.Contains(prefixes, want) {
			t.Fatalf("%s: no route under %s found (the pattern no longer reads the file?): %v", routesFile, want, prefixes)
		}
	}
	if !slices.Contains(paths, eventsPath) {
		t.Fatalf("%s: no %s route", routesFile, eventsPath)
	}
	return paths, prefixes
}

// bffSamples are the paths a front must send to the BFF: every route, each
// prefix bare and with a path under it, and the webhook path.
func bffSamples(t *testing.T) []string {
	paths, prefixes := bffRoutes(t)
	out := slices.Clone(paths)
	for _, p := range prefixes {
		out = append(out, p, p+"/anything/under/it")
	}
	return append(out, exampleWebhookPath)
}

// appSamples are paths of the app that a front must not send to the BFF.
var appSamples = []string{"/", "/index.html", "/app-3f2a9c1e.js", "/payments/123", "/authx", "/apix", "/bffx", "/webhooks"}

// docSection is the text of docs/deployment.md under heading (a whole
// "## …" or "### …" line) up to the next heading of its level or above.
func docSection(t *testing.T, heading string) string {
	t.Helper()
	return fileSection(t, deploymentDoc, heading)
}

// fileSection is docSection for the Markdown file doc.
func fileSection(t *testing.T, doc, heading string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	var out []string
	in, fence := false, false
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(line, "#") {
			l := strings.Index(line, " ")
			if in && l > 0 && l <= level {
				break
			}
			if line == heading {
				in = true
				continue
			}
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s has no heading %q", doc, heading)
	}
	return strings.Join(out, "\n")
}

// docBlock is the first fenced block of language lang ("" for none) in the
// section of docs/deployment.md under heading.
func docBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	return fileBlock(t, deploymentDoc, heading, lang)
}

// fileBlock is docBlock for the Markdown file doc.
func fileBlock(t *testing.T, doc, heading, lang string) string {
	t.Helper()
	text := fileSection(t, doc, heading)
	start := strings.Index(text, "```"+lang+"\n")
	if start < 0 {
		t.Fatalf("%s, %q: no ```%s block", doc, heading, lang)
	}
	text = text[start+len("```"+lang+"\n"):]
	end := strings.Index(text, "\n```")
	if end < 0 {
		t.Fatalf("%s, %q: the ```%s block does not end", doc, heading, lang)
	}
	return text[:end+1]
}

// ------------------------------------------------------------- nginx

// nginxLocation is one location block of the docs' nginx server.
type nginxLocation struct {
	modifier string // "", "=", "~", "~*" or "^~"
	match    string
	body     []string // its directives, comments removed
}

// nginxServer reads the server block with server_name and "listen 443"
// of the docs' nginx example: its own directives and its locations.
func nginxServer(t *testing.T, conf string) (directives []string, locs []nginxLocation) {
	t.Helper()
	depth, inServer, found := 0, false, false
	var cur *nginxLocation
	for _, raw := range strings.Split(conf, "\n") {
		line := raw
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		switch {
		case strings.HasSuffix(line, "{"):
			f := strings.Fields(strings.TrimSuffix(line, "{"))
			depth++
			switch {
			case depth == 1 && f[0] == "server":
				inServer = true
			case depth == 2 && inServer && f[0] == "location":
				l := nginxLocation{}
				if len(f) == 3 {
					l.modifier, l.match = f[1], f[2]
				} else if len(f) == 2 {
					l.match = f[1]
				} else {
					t.Fatalf("nginx example: cannot read %q", raw)
				}
				cur = &l
			}
		case line == "}":
			if depth == 2 && cur != nil {
				locs = append(locs, *cur)
				cur = nil
			}
			if depth == 1 && inServer {
				if slices.ContainsFunc(directives, func(d string) bool { return strings.HasPrefix(d, "listen 443") }) {
					found = true
					return directives, locs
				}
				directives, locs, inServer = nil, nil, false
			}
			depth--
		case cur != nil:
			cur.body = append(cur.body, strings.TrimSuffix(line, ";"))
		case inServer && depth == 1:
			directives = append(directives, strings.TrimSuffix(line, ";"))
		}
	}
	if !found {
		t.Fatal("the nginx example has no server listening on 443")
	}
	return nil, nil
}

// nginxMatch is the location nginx picks for path: an exact match; else the
// longest prefix if it is ^~; else the first regular expression that
// matches, in order; else the longest prefix.
func nginxMatch(t *testing.T, locs []nginxLocation, path string) *nginxLocation {
	t.Helper()
	var longest *nginxLocation
	for i := range locs {
		l := &locs[i]
		switch l.modifier {
		case "=":
			if l.match == path {
				return l
			}
		case "", "^~":
			if strings.HasPrefix(path, l.match) && (longest == nil || len(l.match) > len(longest.match)) {
				longest = l
			}
		}
	}
	if longest != nil && longest.modifier == "^~" {
		return longest
	}
	for i := range locs {
		l := &locs[i]
		if l.modifier != "~" && l.modifier != "~*" {
			continue
		}
		expr := l.match
		if l.modifier == "~*" {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			t.Fatalf("nginx example: location %s %s: %v", l.modifier, l.match, err)
		}
		if re.MatchString(path) {
			return l
		}
	}
	return longest
}

// directive is the value of the last directive name in ds ("" if none).
func directive(ds []string, name string) string {
	v := ""
	for _, d := range ds {
		f := strings.Fields(d)
		if len(f) > 0 && f[0] == name {
			v = strings.Join(f[1:], " ")
		}
	}
	return v
}

// nginxDuration reads an nginx time ("60s", "1h", "3600").
func nginxDuration(t *testing.T, v string) time.Duration {
	t.Helper()
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("nginx example: the time %q: %v", v, err)
	}
	return d
}

func TestNginxExampleRoutesTheBFFPaths(t *testing.T) {
	server, locs := nginxServer(t, docBlock(t, "### nginx", "nginx"))
	toBFF := func(l *nginxLocation) bool {
		return l != nil && strings.HasPrefix(directive(l.body, "proxy_pass"), "http://bff")
	}
	for _, p := range bffSamples(t) {
		if l := nginxMatch(t, locs, p); !toBFF(l) {
			t.Errorf("nginx example: %s goes to %+v, want a location that proxies to the BFF", p, l)
		}
	}
	for _, p := range appSamples {
		if l := nginxMatch(t, locs, p); l == nil || toBFF(l) || directive(l.body, "root") == "" {
			t.Errorf("nginx example: %s goes to %+v, want the app's files", p, l)
		}
	}

	// The event stream's location: unbuffered, uncached, uncompressed,
	// over HTTP/1.1, and idle far longer than a heartbeat.
	l := nginxMatch(t, locs, eventsPath)
	if l == nil {
		t.Fatalf("nginx example: no location for %s", eventsPath)
	}
	eff := func(name string) string { // a location's own directive, else the server's
		if v := directive(l.body, name); v != "" {
			return v
		}
		return directive(server, name)
	}
	for name, want := range map[string]string{"proxy_buffering": "off", "proxy_cache": "off", "gzip": "off", "proxy_http_version": "1.1"} {
		if got := eff(name); got != want {
			t.Errorf("nginx example, %s: %s is %q, want %s", eventsPath, name, got, want)
		}
	}
	if v := eff("proxy_read_timeout"); v == "" || nginxDuration(t, v) < 4*streamHeartbeat {
		t.Errorf("nginx example, %s: proxy_read_timeout %q, want at least 4x the %v heartbeat (nginx's default is 60s; set it)", eventsPath, v, streamHeartbeat)
	}
	// nginx inherits proxy_set_header from the server only into a location
	// that sets none of its own: every BFF location must end up with these.
	for i := range locs {
		l := &locs[i]
		if !toBFF(l) {
			continue
		}
		var hdrs []string
		for _, ds := range [][]string{l.body, server} {
			for _, d := range ds {
				if f := strings.Fields(d); len(f) >= 3 && f[0] == "proxy_set_header" {
					hdrs = append(hdrs, f[1]+" "+strings.Join(f[2:], " "))
				}
			}
			if len(hdrs) > 0 {
				break
			}
		}
		for _, want := range []string{`Connection ""`, "X-Forwarded-For $proxy_add_x_forwarded_for", "X-Request-Id $request_id"} {
			if !slices.Contains(hdrs, want) {
				t.Errorf("nginx example, location %s %s: no proxy_set_header %s (it sets %v)", l.modifier, l.match, want, hdrs)
			}
		}
	}
}

// ------------------------------------------------------------- HAProxy

func TestHAProxyExampleRoutesTheBFFPaths(t *testing.T) {
	block := docBlock(t, "### HAProxy", "")
	acls := map[string][]func(string) bool{}
	useBackend, defaultBackend, cond := "", "", ""
	sc := bufio.NewScanner(strings.NewReader(block))
	inApp := false
	for sc.Scan() {
		f := strings.Fields(haproxyCode(sc.Text()))
		if len(f) == 0 {
			continue
		}
		if haproxySections[f[0]] {
			inApp = f[0] == "frontend" && len(f) > 1 && f[1] == "app"
			continue
		}
		if !inApp {
			continue
		}
		switch f[0] {
		case "acl":
			if len(f) < 4 {
				t.Fatalf("HAProxy example: %v", f)
			}
			vals := f[3:]
			switch f[2] {
			case "path":
				acls[f[1]] = append(acls[f[1]], func(p string) bool { return slices.Contains(vals, p) })
			case "path_beg":
				acls[f[1]] = append(acls[f[1]], func(p string) bool {
					return slices.ContainsFunc(vals, func(v string) bool { return strings.HasPrefix(p, v) })
				})
			default:
				t.Fatalf("HAProxy example: this test reads path and path_beg ACLs only: %v", f)
			}
		case "use_backend":
			if len(f) != 4 || f[2] != "if" {
				t.Fatalf("HAProxy example: this test reads `use_backend B if ACL` only: %v", f)
			}
			useBackend, cond = f[1], f[3]
		case "default_backend":
			defaultBackend = f[1]
		}
	}
	if useBackend == "" || defaultBackend == "" || len(acls[cond]) == 0 {
		t.Fatalf("HAProxy example: frontend app needs acl lines, use_backend ... if and default_backend")
	}
	backend := func(p string) string { // HAProxy ORs the lines of one ACL name
		for _, m := range acls[cond] {
			if m(p) {
				return useBackend
			}
		}
		return defaultBackend
	}
	if useBackend != "relay" {
		t.Errorf("HAProxy example: the BFF's paths go to %s, want relay (frontend relayed answers an instance's failure)", useBackend)
	}
	for _, p := range bffSamples(t) {
		if got := backend(p); got != useBackend {
			t.Errorf("HAProxy example: %s goes to %s, want %s (the BFF)", p, got, useBackend)
		}
	}
	for _, p := range appSamples {
		if got := backend(p); got != defaultBackend {
			t.Errorf("HAProxy example: %s goes to %s, want %s (the app)", p, got, defaultBackend)
		}
	}
}

// ------------------------------------------------------------- Ingress

func TestIngressExampleRoutesTheBFFPaths(t *testing.T) {
	var ing any
	if err := yaml.Unmarshal([]byte(docBlock(t, "### Kubernetes Ingress", "yaml")), &ing); err != nil {
		t.Fatalf("the Ingress example: %v", err)
	}
	type rule struct{ path, typ, service string }
	var rules []rule
	for _, p := range list(ing, "spec", "rules", 0, "http", "paths") {
		rules = append(rules, rule{str(p, "path"), str(p, "pathType"), str(p, "backend", "service", "name")})
	}
	// The Ingress specification: an Exact match wins, then the longest
	// Prefix whose path elements begin the request's.
	route := func(p string) string {
		best := rule{}
		for _, r := range rules {
			switch r.typ {
			case "Exact":
				if r.path == p {
					return r.service
				}
			case "Prefix":
				if (p == r.path || strings.HasPrefix(p, strings.TrimSuffix(r.path, "/")+"/")) && len(r.path) > len(best.path) {
					best = r
				}
			}
		}
		return best.service
	}
	for _, p := range bffSamples(t) {
		if got := route(p); got != "bff" {
			t.Errorf("Ingress example: %s goes to %q, want the Service bff", p, got)
		}
	}
	for _, p := range appSamples {
		if got := route(p); got == "bff" {
			t.Errorf("Ingress example: %s goes to the BFF, want the app's own Ingress", p)
		}
	}
	ann := func(k string) string { return str(ing, "metadata", "annotations", "nginx.ingress.kubernetes.io/"+k) }
	if ann("proxy-buffering") != "off" {
		t.Errorf("Ingress example: proxy-buffering %q, want off (%s is an event stream)", ann("proxy-buffering"), eventsPath)
	}
	for _, k := range []string{"proxy-read-timeout", "proxy-send-timeout"} {
		if n, err := strconv.Atoi(ann(k)); err != nil || time.Duration(n)*time.Second < 4*streamHeartbeat {
			t.Errorf("Ingress example: %s %q, want at least 4x the %v heartbeat", k, ann(k), streamHeartbeat)
		}
	}
}

// ------------------------------------------------------------- prose

// TestDeploymentDocNamesEveryBFFPath: where docs/deployment.md lists what a
// front sends to the BFF, it names every prefix of the route table and the
// webhook path.
func TestDeploymentDocNamesEveryBFFPath(t *testing.T) {
	_, prefixes := bffRoutes(t)
	for _, h := range []string{"## Serve the app and the BFF from one origin", "### A CDN in front", "## When CORS is needed", "## Checklist"} {
		text := docSection(t, h)
		if h == "## Serve the app and the BFF from one origin" {
			// Only the prose before the first example.
			text, _, _ = strings.Cut(text, "### ")
		}
		for _, p := range prefixes {
			if !strings.Contains(text, "`"+p+"`") && !strings.Contains(text, "`"+p+"/*`") {
				t.Errorf("%s, %q: does not name %s", deploymentDoc, h, p)
			}
		}
		if !strings.Contains(text, "webhook") {
			t.Errorf("%s, %q: does not name the webhook path (payments.webhook_path)", deploymentDoc, h)
		}
	}
}

// TestComposeDeliversWebhooksThroughTheFront: in the compose stack the
// simulator posts its webhooks to the BFFs' payments.webhook_path through
// HAProxy, as an upstream would through the app's front door, signed with a
// secret the BFFs accept.
func TestComposeDeliversWebhooksThroughTheFront(t *testing.T) {
	services, _ := get(yamlDocs(t, composeFile)[0], "services").(map[string]any)
	var sim, lb string
	var bffs []string
	for _, name := range sortedKeys(services) {
		svc := services[name]
		switch {
		case str(svc, "build", "target") == "upstream-sim":
			sim = name
		case str(svc, "build", "target") == "bff" || (get(svc, "build") == nil && strings.HasPrefix(str(svc, "image"), "fintech-bff/bff")):
			bffs = append(bffs, name)
		case strings.HasPrefix(str(svc, "image"), "haproxy"):
			lb = name
		}
	}
	if sim == "" || lb == "" || len(bffs) == 0 {
		t.Fatalf("the stack needs the simulator, HAProxy and BFFs: %q %q %v", sim, lb, bffs)
	}
	args := list(services[sim], "command")
	flag := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				s, _ := args[i+1].(string)
				return s
			}
		}
		return ""
	}
	hook, err := url.Parse(flag("-webhook-url"))
	if err != nil || hook.Host == "" {
		t.Fatalf("service %s: no -webhook-url (%v): the BFFs' webhook path is never used", sim, err)
	}
	bind := ""
	for _, d := range haproxyDirectives(t, haproxyFile) {
		if d.section == "frontend public" && d.fields[0] == "bind" {
			bind = d.fields[1]
		}
	}
	if hook.Hostname() != lb || ":"+hook.Port() != bind {
		t.Errorf("service %s posts webhooks to %s, want HAProxy's front door %s%s", sim, hook.Host, lb, bind)
	}
	secret := flag("-webhook-secret")
	if v := str(services[sim], "environment", "SIM_WEBHOOK_SECRET"); v != "" {
		secret = v
	}
	if secret == "" {
		secret = upstreamsim.DefaultWebhookSecret
	}
	for _, name := range bffs {
		svc := services[name]
		var cfgPath string
		for _, v := range list(svc, "volumes") {
			if str(v, "target") == "/etc/bff/config.yaml" {
				cfgPath = str(v, "source")
			}
		}
		cfg := yamlDocs(t, cfgPath)[0]
		if p := str(cfg, "payments", "webhook_path"); p != hook.Path {
			t.Errorf("service %s: payments.webhook_path %q, the simulator posts to %q", name, p, hook.Path)
		}
		var secrets []string
		if err := json.Unmarshal([]byte(str(svc, "environment", "BFF_PAYMENTS_WEBHOOK_SECRETS")), &secrets); err != nil {
			t.Errorf("service %s: BFF_PAYMENTS_WEBHOOK_SECRETS: %v", name, err)
		}
		if !slices.Contains(secrets, secret) {
			t.Errorf("service %s: BFF_PAYMENTS_WEBHOOK_SECRETS lacks the simulator's signing secret: every webhook would be refused 403", name)
		}
	}
}
