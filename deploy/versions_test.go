package deploy

// The minimum Redis and PostgreSQL versions docs/deployment.md states
// ("Redis and PostgreSQL versions"): what the suite runs on
// (TestServerVersions, -tags integration) and what the compose stack runs
// must be at least those.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const versionsHeading = "## Redis and PostgreSQL versions"

// version is a server's major.minor.
type version struct{ major, minor int }

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

func (v version) less(w version) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

// parseVersion reads "7.0", "7.0.15", "15" or "15.20 (Debian ...)".
func parseVersion(s string) (version, error) {
	m := regexp.MustCompile(`^(\d+)(?:\.(\d+))?`).FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return version{}, fmt.Errorf("not a version: %q", s)
	}
	v := version{}
	v.major, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		v.minor, _ = strconv.Atoi(m[2])
	}
	return v, nil
}

// statedMinimums reads the table of docs/deployment.md: server name → the
// minimum in bold in its row.
func statedMinimums(t *testing.T) map[string]version {
	t.Helper()
	out := map[string]version{}
	re := regexp.MustCompile(`(?m)^\| (Redis|PostgreSQL) \| \*\*([0-9.]+)\*\* \|`)
	for _, m := range re.FindAllStringSubmatch(docSection(t, versionsHeading), -1) {
		v, err := parseVersion(m[2])
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = v
	}
	for _, s := range []string{"Redis", "PostgreSQL"} {
		if _, ok := out[s]; !ok {
			t.Fatalf("%s, %q: no row `| %s | **<minimum>** |`", deploymentDoc, versionsHeading, s)
		}
	}
	return out
}

// TestComposeRunsTheStatedVersions: the compose stack's Redis and
// PostgreSQL images are at least the stated minimums.
func TestComposeRunsTheStatedVersions(t *testing.T) {
	min := statedMinimums(t)
	services, _ := get(yamlDocs(t, composeFile)[0], "services").(map[string]any)
	seen := map[string]bool{}
	for _, name := range sortedKeys(services) {
		img := str(services[name], "image")
		repo, tag, _ := strings.Cut(img, ":")
		server := map[string]string{"redis": "Redis", "postgres": "PostgreSQL"}[repo]
		if server == "" {
			continue
		}
		seen[server] = true
		v, err := parseVersion(tag)
		if err != nil {
			t.Errorf("service %s: image %s: pin a version (%v)", name, img, err)
			continue
		}
		if !strings.Contains(tag, ".") && v.major == min[server].major {
			v.minor = min[server].minor // "7" is the newest 7.x, at least 7.0
		}
		if v.less(min[server]) {
			t.Errorf("service %s runs %s, below the stated minimum %s %v", name, img, server, min[server])
		}
	}
	if !seen["Redis"] || !seen["PostgreSQL"] {
		t.Errorf("the compose stack has no Redis or no PostgreSQL image: %v", seen)
	}
}
