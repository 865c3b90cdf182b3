package webhooks

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// reSecret is a whsec_ secret as text: the prefix and a run of standard
// base64.
var reSecret = regexp.MustCompile(`whsec_[A-Za-z0-9+/]+={0,2}`)

// Every secret printed in the repository (code, tests, docs, deploy files,
// config.*.yaml) is in published, so that production refuses it. A secret that does not parse is not looked for: ParseSecret
// refuses it everywhere.
func TestPublishedHoldsEverySecretInTheRepository(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root %s: %v", root, err)
	}
	files, found := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if info, err := d.Info(); err != nil || !info.Mode().IsRegular() || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, m := range reSecret.FindAll(b, -1) {
			if _, err := ParseSecret(string(m)); err != nil {
				continue
			}
			found++
			if !Published(string(m)) {
				rel, _ := filepath.Rel(root, path)
				// The secret is printed in the repository already; naming
				// it here tells the developer what to add.
				t.Errorf("%s prints the secret %s, which is not in published (internal/webhooks/published.go): production would accept it", rel, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || found == 0 {
		t.Fatalf("walked %d files and found %d secrets: not the repository", files, found)
	}
}

// Every entry of published is a well-formed secret (one that did not
// parse could never match), and the simulator's default is one of them.
func TestPublished(t *testing.T) {
	for _, s := range published {
		if _, err := ParseSecret(s); err != nil {
			t.Errorf("published holds %s, which does not parse: %v", s, err)
		}
	}
	if !Published(upstreamsim.DefaultWebhookSecret) {
		t.Error("the simulator's default secret is not published")
	}
	// The same key spelt with other unused bits in its base64's last
	// character ("IQ==" and "IR==" both end in the byte "!") is still the
	// published key.
	other := strings.Replace(upstreamsim.DefaultWebhookSecret, "IQ==", "IR==", 1)
	if k1, k2 := mustParse(t, other), mustParse(t, upstreamsim.DefaultWebhookSecret); other == upstreamsim.DefaultWebhookSecret || !bytes.Equal(k1, k2) {
		t.Fatalf("%s is not another spelling of the simulator's default", other)
	}
	if !Published(other) {
		t.Error("the simulator's default, spelt otherwise, is not published")
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	fresh := "whsec_" + base64.StdEncoding.EncodeToString(key) // printed nowhere
	for _, s := range []string{fresh, "whsec_c2hvcnQ=", "", "not a secret"} {
		if Published(s) {
			t.Errorf("Published(%q) = true, want false", s)
		}
	}
}

func mustParse(t *testing.T, secret string) []byte {
	t.Helper()
	key, err := ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
