package chartcheck

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// monitoringDecoder decodes the Prometheus Operator's objects strictly into
// their Go types (the operator's own, the version go.mod names).
var monitoringDecoder = sync.OnceValue(func() runtime.Decoder {
	s := runtime.NewScheme()
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
})

// crdSchema is what the API server keeps of one version of a
// CustomResourceDefinition to validate its objects.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// CRDs are the schemas of custom resources, by group, version and kind.
type CRDs map[schema.GroupVersionKind]crdSchema

// LoadCRDs reads CustomResourceDefinition files (apiextensions.k8s.io/v1).
func LoadCRDs(files ...string) (CRDs, error) {
	crds := CRDs{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("%s: version %s has no schema", f, v.Name)
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("%s %s: %w", f, v.Name, err)
			}
			ss, err := structuralschema.NewStructural(&internal)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", f, v.Name, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", f, v.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			crds[gvk] = crdSchema{structural: ss, validator: validator, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}
		}
	}
	return crds, nil
}

// validateCustom decodes a custom resource strictly into its Go type, then
// validates it as the API server does on create in namespace: the metadata,
// then against its CRD: the OpenAPI schema, the metadata's types, CEL rules, and the fields the server would prune
// (which it drops silently; here they are errors).
func validateCustom(o Object, namespace string, crds CRDs) error {
	_, gvk, err := monitoringDecoder().Decode(o.Raw, nil, nil)
	if err != nil {
		return err
	}
	crd, ok := crds[*gvk]
	if !ok {
		return fmt.Errorf("no CustomResourceDefinition loaded for %s", gvk)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(o.Raw, &obj); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetNamespace() == "" {
		u.SetNamespace(namespace)
	}
	// What the custom resource strategy checks of every object's metadata.
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(u, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, crd.validator)...)
	errs = append(errs, objectmeta.Validate(context.Background(), nil, obj, crd.structural, true)...)
	if crd.cel != nil {
		celErrs, _ := crd.cel.Validate(context.Background(), nil, crd.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	pruned := pruning.PruneWithOptions(runtime.DeepCopyJSON(obj), crd.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range pruned {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field: the API server would drop it"))
	}
	if len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return nil
}
