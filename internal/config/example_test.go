package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const examplePath = "../../config.example.yaml"

// TestExampleDocumentsEveryKey keeps config.example.yaml from drifting: it
// must hold every key path of Config, in declaration order, each with a
// comment, and its values must be the defaults.
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	root, err := parseYAML(data)
	if err != nil || root == nil {
		t.Fatalf("parsing the example: got %v, want one document", err)
	}
	var got []string
	var uncommented []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := prefix + k.Value
				if !slices.Contains(got, p) {
					got = append(got, p)
					// A key's comment sits on its line, or above it. Block
					// sections (upstream:, redis:) need none; list entries'
					// keys are documented by the list's comment.
					if v.Kind != yaml.MappingNode && !strings.Contains(p, "routes.") {
						if k.LineComment == "" && v.LineComment == "" && k.HeadComment == "" && !hasFootComment(v) {
							uncommented = append(uncommented, p)
						}
					}
				}
				walk(v, p+".")
			}
		case yaml.SequenceNode:
			for _, item := range n.Content {
				walk(item, prefix)
			}
		}
	}
	walk(root, "")
	if want := structPaths(reflect.TypeFor[Config](), ""); !slices.Equal(got, want) {
		t.Errorf("key paths in the example:\n got %v\nwant %v", got, want)
	}
	if len(uncommented) > 0 {
		t.Errorf("keys without a comment: %v", uncommented)
	}
}

func hasFootComment(n *yaml.Node) bool {
	return n.FootComment != "" || (n.Kind == yaml.ScalarNode && n.LineComment != "")
}

// TestExampleLoads loads the example as it is, with only the keys it
// leaves empty supplied by the environment, and checks it yields exactly
// what the defaults yield.
func TestExampleLoads(t *testing.T) {
	for name, env := range map[string]map[string]string{"production": prodEnv(), "development": devEnv()} {
		t.Run(name, func(t *testing.T) {
			fromExample, err := Load(examplePath, getenv(env))
			if err != nil {
				t.Fatalf("loading the example: got %v, want nil", err)
			}
			fromDefaults := mustLoad(t, "", env)
			if !reflect.DeepEqual(fromExample, fromDefaults) {
				t.Errorf("the example's values differ from the defaults:\n got\n%s\nwant\n%s", fromExample.Dump(), fromDefaults.Dump())
			}
		})
	}
}
