package deploy

// The web app in the BFF's image: the bff-app target of deploy/Dockerfile
// and the Dockerfile docs/deployment.md gives a team. The BFF's image is
// distroless and the chart mounts only the config and the Secret, so the
// app's files can only reach static_dir by being built into an image.

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// staticDirEnv is static_dir's environment variable (docs/configuration.md).
const staticDirEnv = "BFF_STATIC_DIR"

// dockerInstr is one instruction of a Dockerfile stage: its keyword
// (upper case), its flags (--from=app) and its other arguments.
type dockerInstr struct {
	cmd   string
	flags map[string]string
	args  []string
	text  string
}

func parseInstr(text string) dockerInstr {
	f := strings.Fields(text)
	in := dockerInstr{cmd: strings.ToUpper(f[0]), flags: map[string]string{}, text: text}
	rest := f[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(rest[0], "--"), "=")
		in.flags[k] = v
		rest = rest[1:]
	}
	in.args = rest
	return in
}

// dockerStage is a stage of a Dockerfile: its base, its name and its
// instructions after FROM.
type dockerStage struct {
	from, name string
	instrs     []dockerInstr
}

func parseStages(stages [][]string) []dockerStage {
	var out []dockerStage
	for _, s := range stages {
		from := parseInstr(s[0])
		st := dockerStage{from: from.args[0]}
		if len(from.args) == 3 && strings.EqualFold(from.args[1], "AS") {
			st.name = from.args[2]
		}
		for _, text := range s[1:] {
			st.instrs = append(st.instrs, parseInstr(text))
		}
		out = append(out, st)
	}
	return out
}

// dockerfileStages splits a Dockerfile's text into stages of instructions
// (continuations joined, comments dropped).
func dockerfileStages(text string) [][]string {
	var stages [][]string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += trimmed
		if strings.EqualFold(strings.Fields(cur)[0], "FROM") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], cur)
		}
		cur = ""
	}
	return stages
}

func stageNamed(t *testing.T, stages []dockerStage, name string) dockerStage {
	t.Helper()
	for _, s := range stages {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no stage named %s", name)
	return dockerStage{}
}

// appCopy checks that stage copies a directory of another stage (the app's
// build) to where BFF_STATIC_DIR points and sets no root user, and returns
// the source stage, the directory and where it goes.
func appCopy(t *testing.T, where string, stage dockerStage) (fromStage, dir, dest string) {
	t.Helper()
	env := map[string]string{}
	for _, in := range stage.instrs {
		switch in.cmd {
		case "ENV":
			for _, a := range in.args {
				if k, v, ok := strings.Cut(a, "="); ok {
					env[k] = strings.Trim(v, `"`)
				}
			}
			if len(in.args) == 2 && !strings.Contains(in.args[0], "=") {
				env[in.args[0]] = in.args[1]
			}
		case "USER":
			if u, _, _ := strings.Cut(in.args[0], ":"); u == "root" || u == "0" {
				t.Errorf("%s: USER %s: the BFF runs as its non-root user", where, in.args[0])
			}
		}
	}
	dest = env[staticDirEnv]
	if !strings.HasPrefix(dest, "/") {
		t.Fatalf("%s: no ENV %s=<an absolute directory> (static_dir)", where, staticDirEnv)
	}
	for _, in := range stage.instrs {
		if in.cmd == "COPY" && in.flags["from"] != "" && len(in.args) == 2 && strings.TrimSuffix(in.args[1], "/") == dest {
			if in.flags["chown"] != "" || in.flags["chmod"] != "" {
				t.Errorf("%s: %s: the app's files need no owner or mode of their own (the BFF only reads them)", where, in.text)
			}
			return in.flags["from"], strings.TrimSuffix(in.args[0], "/"), dest
		}
	}
	t.Fatalf("%s: no COPY --from=<the app's stage> <its build> %s", where, dest)
	return "", "", ""
}

// TestDockerfileAppTarget: bff-app is the BFF's image (the same binary,
// user, ports, entrypoint and command as the default target) with the
// example app's build in the directory BFF_STATIC_DIR names.
func TestDockerfileAppTarget(t *testing.T) {
	stages := parseStages(dockerStages(t))
	final := stages[len(stages)-1]
	app := stageNamed(t, stages, "bff-app")
	if app.from != final.from {
		t.Errorf("bff-app is FROM %s, the BFF's image FROM %s", app.from, final.from)
	}
	keep := func(s dockerStage) []string {
		var out []string
		for _, in := range s.instrs {
			if in.cmd == "COPY" && in.flags["from"] == "build" || slices.Contains([]string{"USER", "EXPOSE", "ENTRYPOINT", "CMD"}, in.cmd) {
				out = append(out, in.text)
			}
		}
		return out
	}
	if got, want := keep(app), keep(final); !slices.Equal(got, want) {
		t.Errorf("bff-app's binary, user, ports, entrypoint and command:\n%q\nwant the BFF's:\n%q", got, want)
	}
	from, dir, _ := appCopy(t, "deploy/Dockerfile bff-app", app)
	src := stageNamed(t, stages, from)
	// The build writes web/app/dist (web/app/buildkit.mjs, outDir) under
	// the stage's WORKDIR.
	workdir := ""
	built := false
	for _, in := range src.instrs {
		switch in.cmd {
		case "WORKDIR":
			workdir = in.args[0]
		case "RUN":
			if strings.Contains(in.text, "npm run build --prefix web/app") {
				built = true
			}
		}
	}
	if !built || dir != workdir+"/web/app/dist" {
		t.Errorf("bff-app copies %s from stage %s, which builds web/app in %s (built: %v): want %s/web/app/dist", dir, from, workdir, built, workdir)
	}
	ignore, err := os.ReadFile(dockerfile + ".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\*\*/node_modules$`).Match(ignore) {
		t.Error("Dockerfile.dockerignore must keep node_modules out: the app stage installs its own")
	}
}

// TestDocsAppDockerfile: the Dockerfile docs/deployment.md gives a team
// builds the app in one stage and copies its build into the BFF's release
// image, where BFF_STATIC_DIR names it, keeping the BFF's user, entrypoint
// and command.
func TestDocsAppDockerfile(t *testing.T) {
	stages := parseStages(dockerfileStages(docBlock(t, "### The app in the BFF's image", "dockerfile")))
	if len(stages) != 2 {
		t.Fatalf("want two stages (the app's build, the BFF's image with it), got %d", len(stages))
	}
	final := stages[1]
	if !strings.Contains(final.from, "/fintech-bff/bff:") {
		t.Errorf("the final stage is FROM %s, want the BFF's release image (registry.example.com/fintech-bff/bff:<version>)", final.from)
	}
	from, dir, dest := appCopy(t, "docs/deployment.md's Dockerfile", final)
	for _, in := range final.instrs {
		if in.cmd == "ENTRYPOINT" || in.cmd == "CMD" || in.cmd == "USER" {
			t.Errorf("docs/deployment.md's Dockerfile: %s: the BFF image's own must stay", in.text)
		}
	}
	if from != stages[0].name {
		t.Errorf("it copies from %s, the app's stage is %s", from, stages[0].name)
	}
	built := false
	workdir := ""
	for _, in := range stages[0].instrs {
		switch in.cmd {
		case "WORKDIR":
			workdir = in.args[0]
		case "RUN":
			built = built || strings.Contains(in.text, "npm run build")
		}
	}
	if !built || !strings.HasPrefix(dir, workdir+"/") {
		t.Errorf("it copies %s, not what the app's stage builds under %s (built: %v)", dir, workdir, built)
	}
	// The same directory as the repository's own target, so the two say the
	// same thing.
	repo := parseStages(dockerStages(t))
	_, _, repoDest := appCopy(t, "deploy/Dockerfile bff-app", stageNamed(t, repo, "bff-app"))
	if dest != repoDest {
		t.Errorf("the docs' image serves %s, deploy/Dockerfile's bff-app %s", dest, repoDest)
	}
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^static_dir:`).Match(b) {
		t.Errorf("%s has no static_dir: %s names no configuration key", exampleConfig, staticDirEnv)
	}
}
