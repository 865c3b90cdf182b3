//go:build integration

package deploy

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/edge"
)

// dockerignore is deploy/Dockerfile.dockerignore's patterns, matched as
// BuildKit does against a path of the build context (the repository).
type dockerignore []string

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	b, err := os.ReadFile(dockerfile + ".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var ps dockerignore
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			t.Fatalf("Dockerfile.dockerignore: exceptions (%s) are not read here", l)
		}
		ps = append(ps, strings.Trim(l, "/"))
	}
	return ps
}

// ignored reports whether rel (slash-separated, from the context's root)
// is left out of the context.
func (d dockerignore) ignored(rel string) bool {
	for _, p := range d {
		if rest, ok := strings.CutPrefix(p, "**/"); ok {
			segs := strings.Split(rel, "/")
			for i := range segs {
				if m, _ := path.Match(rest, strings.Join(segs[i:], "/")); m {
					return true
				}
			}
			continue
		}
		if m, _ := path.Match(p, rel); m {
			return true
		}
	}
	return false
}

// copyContext copies src (a path of the repository) to dst as COPY does: a
// directory's contents, without what the dockerignore leaves out.
func copyContext(t *testing.T, ign dockerignore, src, dst string) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(root, src), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if ign.ignored(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		sub, _ := filepath.Rel(filepath.Join(root, src), p)
		target := filepath.Join(dst, sub)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
}

// TestDockerfileBuildsTheApp runs the steps of the stage bff-app copies the
// web app from (WORKDIR, COPY from the context as the dockerignore leaves
// it, ENV, RUN) in a directory of its own, with this machine's Node.js for
// the stage's image, then checks that what bff-app copies is a web app the
// BFF serves (edge.OpenStatic, the code static_dir runs) with every file its
// index.html loads. No Docker daemon is needed; a missing COPY (a file the
// build reads but the stage does not copy) fails here as in docker build.
func TestDockerfileBuildsTheApp(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("Node.js and npm are needed to build the web app (Node.js 20.19 or later from nodejs.org or NodeSource)")
	}
	stages := parseStages(dockerStages(t))
	from, dir, _ := appCopy(t, "deploy/Dockerfile bff-app", stageNamed(t, stages, "bff-app"))
	src := stageNamed(t, stages, from)
	ign := readDockerignore(t)
	root := t.TempDir()
	workdir := "/"
	env := append(os.Environ(), "npm_config_update_notifier=false", "npm_config_prefer_offline=true")
	for _, in := range src.instrs {
		switch in.cmd {
		case "WORKDIR":
			if path.IsAbs(in.args[0]) {
				workdir = in.args[0]
			} else {
				workdir = path.Join(workdir, in.args[0])
			}
			if err := os.MkdirAll(filepath.Join(root, workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			if in.flags["from"] != "" || len(in.args) < 2 {
				t.Fatalf("%s: only COPY of the build context is replayed here", in.text)
			}
			dest := in.args[len(in.args)-1]
			if !path.IsAbs(dest) {
				dest = path.Join(workdir, dest) + map[bool]string{true: "/"}[strings.HasSuffix(dest, "/")]
			}
			for _, s := range in.args[:len(in.args)-1] {
				fi, err := os.Stat(filepath.Join(repoRoot, s))
				if err != nil {
					t.Fatalf("%s: %v", in.text, err)
				}
				target := filepath.Join(root, dest)
				if !fi.IsDir() && (strings.HasSuffix(dest, "/") || len(in.args) > 2) {
					target = filepath.Join(target, path.Base(s))
				}
				copyContext(t, ign, s, target)
			}
		case "ENV":
			env = append(env, in.args...)
		case "RUN":
			cmdline := strings.Join(in.args, " ")
			if regexp.MustCompile(`(^|\s)/`).MatchString(cmdline) {
				t.Fatalf("%s: an absolute path is not replayed here", in.text)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // npm ci and esbuild, on 2 shared cores
			cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
			cmd.Dir, cmd.Env = filepath.Join(root, workdir), env
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("%s: %v\n%s", in.text, err, out)
			}
			t.Logf("%s\n%s", in.text, strings.TrimSpace(string(out)))
		default:
			t.Fatalf("%s: not replayed here", in.text)
		}
	}
	built := filepath.Join(root, dir)
	s, err := edge.OpenStatic(built, true)
	if err != nil {
		t.Fatalf("what bff-app copies (%s) is not a web app the BFF serves: %v", dir, err)
	}
	s.Close()
	index, err := os.ReadFile(filepath.Join(built, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="/([^"/][^"]*)"`).FindAllStringSubmatch(string(index), -1)
	if len(refs) < 2 {
		t.Fatalf("index.html loads %d files, want the app's script and style:\n%s", len(refs), index)
	}
	for _, r := range refs {
		if _, err := os.Stat(filepath.Join(built, r[1])); err != nil {
			t.Errorf("index.html loads /%s, which the build did not write: %v", r[1], err)
		}
	}
}
