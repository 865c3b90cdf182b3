// Package chartcheck lints, renders and validates the BFF's Helm chart
// (deploy/helm/bff) without a cluster, with Helm's and Kubernetes' own code:
// Helm's linter and template engine, then, for every rendered object, what
// the API server would do on create or on update (strict decoding,
// defaulting, the resource's validation and warnings, immutable fields) and,
// for the Prometheus Operator's objects, their CustomResourceDefinitions'
// schemas.
//
// It is a module of its own so that the BFF's go.mod does not carry Helm and
// Kubernetes.
package chartcheck

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// KubeVersion is the Kubernetes version the chart is rendered and validated
// for: the one whose validation code this module builds (k8s.io/kubernetes in
// go.mod). Helm built from source would otherwise report v1.20.
const KubeVersion = "v1.37.2"

// Lint runs Helm's linter (what `helm lint` runs) on the chart with values
// over its defaults, for a cluster of kubeVersion, and returns every message
// of warning severity or worse.
func Lint(chartDir string, values map[string]any, namespace, kubeVersion string) ([]string, error) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	l := lint.AllWithKubeVersion(chartDir, values, namespace, kv)
	var out []string
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	return out, nil
}

// Release names what `helm template NAME --namespace NS` would be given.
type Release struct {
	Name      string
	Namespace string
	// Service is .Release.Service, "Helm" when empty. The plain manifests
	// are rendered with "kubectl": they are not managed by Helm.
	Service string
}

// Manifest is one rendered template.
type Manifest struct {
	Template string // e.g. "templates/deployment.yaml"
	Content  string
}

// ReadValues reads a values file.
func ReadValues(file string) (map[string]any, error) {
	v, err := chartutil.ReadValuesFile(file)
	if err != nil {
		return nil, err
	}
	return v.AsMap(), nil
}

// Render renders the chart as `helm template` does: values over the chart's
// defaults, checked against values.schema.json, for KubeVersion with the
// Prometheus Operator's API available. It returns the templates that
// rendered to an object, in template order, without the partials and NOTES.
func Render(chartDir string, values map[string]any, rel Release) ([]Manifest, error) {
	return render(chartDir, values, rel, false)
}

// RenderStrict renders as `helm lint --strict` does: a template that reads
// a value the values do not define fails.
func RenderStrict(chartDir string, values map[string]any, rel Release) ([]Manifest, error) {
	return render(chartDir, values, rel, true)
}

// Notes renders the chart's NOTES.txt, what `helm install` prints.
func Notes(chartDir string, values map[string]any, rel Release) (string, error) {
	out, chart, err := renderFiles(chartDir, values, rel, true)
	if err != nil {
		return "", err
	}
	notes, ok := out[chart+"/templates/NOTES.txt"]
	if !ok {
		return "", errors.New("the chart has no templates/NOTES.txt")
	}
	return notes, nil
}

// renderFiles renders every template, NOTES.txt included, by its name
// under the chart's (returned too).
func renderFiles(chartDir string, values map[string]any, rel Release, strict bool) (map[string]string, string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, "", err
	}
	caps, err := capabilities()
	if err != nil {
		return nil, "", err
	}
	top, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, "", err
	}
	if rel.Service != "" {
		r := top["Release"].(map[string]any)
		r["Service"] = rel.Service
	}
	out, err := engine.Engine{Strict: strict}.Render(ch, top)
	if err != nil {
		return nil, "", err
	}
	return out, ch.Name(), nil
}

func render(chartDir string, values map[string]any, rel Release, strict bool) ([]Manifest, error) {
	out, chart, err := renderFiles(chartDir, values, rel, strict)
	if err != nil {
		return nil, err
	}
	var ms []Manifest
	for _, name := range slices.Sorted(maps.Keys(out)) {
		tpl := strings.TrimPrefix(name, chart+"/")
		if path.Ext(tpl) != ".yaml" || strings.TrimSpace(stripComments(out[name])) == "" {
			continue
		}
		ms = append(ms, Manifest{Template: tpl, Content: out[name]})
	}
	return ms, nil
}

func capabilities() (*chartutil.Capabilities, error) {
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	caps.APIVersions = append(caps.APIVersions, "monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
	return caps, nil
}

// stripComments drops whole-line YAML comments, to tell a template that
// rendered only its comments from one that rendered an object.
func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// Object is one rendered Kubernetes object, as generic YAML.
type Object struct {
	Template string
	Raw      []byte
	Kind     string
	Name     string
	Body     map[string]any
}

// Objects splits rendered manifests into their objects.
func Objects(ms []Manifest) ([]Object, error) {
	var objs []Object
	for _, m := range ms {
		docs := releaseutil.SplitManifests(m.Content)
		for _, k := range slices.Sorted(maps.Keys(docs)) {
			doc := docs[k]
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var body map[string]any
			if err := yaml.Unmarshal([]byte(doc), &body); err != nil {
				return nil, fmt.Errorf("%s: %w", m.Template, err)
			}
			kind, _ := body["kind"].(string)
			meta, _ := body["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			objs = append(objs, Object{Template: m.Template, Raw: []byte(doc), Kind: kind, Name: name, Body: body})
		}
	}
	return objs, nil
}

// Validate checks one object as the API server would on create in namespace,
// with crds for custom resources, and returns every error and warning it
// would give.
func Validate(o Object, namespace string, crds CRDs) error {
	return validate(o, nil, namespace, crds)
}

// ValidateUpdate checks o as the API server would as an update of old (what
// `helm upgrade` or `kubectl apply` sends): the create checks, and those of
// an update, such as fields that cannot change. It models a replacement of
// the old rendering by the new one, not a patch of the live object: fields
// the server fills (a Service's clusterIP, the HPA's replica count) are not
// known, and a custom resource gets the create checks only (the bundled
// CRDs have no transition rules).
func ValidateUpdate(old, o Object, namespace string, crds CRDs) error {
	return validate(o, &old, namespace, crds)
}

func validate(o Object, old *Object, namespace string, crds CRDs) error {
	var err error
	if strings.Contains(apiVersion(o), ".") && !strings.HasSuffix(groupOf(apiVersion(o)), ".k8s.io") {
		err = validateCustom(o, namespace, crds) // the same checks on update, for these CRDs
	} else {
		err = validateBuiltin(o, old, namespace)
	}
	if err != nil {
		return fmt.Errorf("%s %s (%s): %w", o.Kind, o.Name, o.Template, err)
	}
	return nil
}

// groupOf is the group of an apiVersion ("" for the core group).
func groupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

func apiVersion(o Object) string {
	v, _ := o.Body["apiVersion"].(string)
	return v
}
