package chartcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
)

// strategies are the API server's create strategies of the kinds the chart
// makes: each validates an object of its kind and warns about it.
var strategies = map[schema.GroupKind]struct {
	resource string
	strategy interface {
		rest.RESTCreateStrategy
		rest.RESTUpdateStrategy
	}
}{
	{Group: "", Kind: "ConfigMap"}:                          {"configmaps", configmap.Strategy},
	{Group: "", Kind: "Service"}:                            {"services", service.Strategy},
	{Group: "", Kind: "ServiceAccount"}:                     {"serviceaccounts", serviceaccount.Strategy},
	{Group: "apps", Kind: "Deployment"}:                     {"deployments", deployment.Strategy},
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: {"horizontalpodautoscalers", horizontalpodautoscaler.Strategy},
	{Group: "networking.k8s.io", Kind: "Ingress"}:           {"ingresses", ingress.Strategy},
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:     {"networkpolicies", networkpolicy.Strategy},
	{Group: "policy", Kind: "PodDisruptionBudget"}:          {"poddisruptionbudgets", poddisruptionbudget.Strategy},
}

// decoder decodes strictly (an unknown or duplicate field is an error, as
// with kubectl's server-side field validation set to Strict), defaults, and
// converts to the internal version the strategies take.
var decoder = sync.OnceValue(func() runtime.Decoder {
	return serializer.NewCodecFactory(legacyscheme.Scheme, serializer.EnableStrict).UniversalDecoder()
})

// validateBuiltin does what the API server does with a create request in
// namespace, or with an update of old when old is not nil: decode, default,
// fill the system fields, then rest.BeforeCreate (the namespace check, the
// strategy's preparation, its validation, the object metadata's validation,
// declarative validation and the warnings) or rest.BeforeUpdate (the same
// for an update: immutable fields among them).
func validateBuiltin(o Object, old *Object, namespace string) error {
	obj, gvk, err := decode(o, namespace, old == nil)
	if err != nil {
		return err
	}
	s, ok := strategies[gvk.GroupKind()]
	if !ok {
		return fmt.Errorf("no validation for %s here: add its strategy to chartcheck", gvk)
	}
	verb := "create"
	if old != nil {
		verb = "update"
	}
	var w recorder
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: verb, APIGroup: gvk.Group, APIVersion: gvk.Version,
		Namespace: namespace, Resource: s.resource, Name: o.Name,
	})
	ctx = warning.WithWarningRecorder(ctx, &w)
	if old == nil {
		err = rest.BeforeCreate(s.strategy, ctx, obj)
	} else {
		prev, prevGVK, derr := decode(*old, namespace, true)
		if derr != nil {
			return fmt.Errorf("the previous object: %w", derr)
		}
		if prevGVK.GroupKind() != gvk.GroupKind() {
			return fmt.Errorf("the previous object is a %s", prevGVK.Kind)
		}
		err = rest.BeforeUpdate(s.strategy, ctx, obj, prev)
	}
	if err != nil {
		return err
	}
	if len(w) > 0 {
		return errors.New("the API server would warn: " + strings.Join(w, "; "))
	}
	return nil
}

// decode decodes, defaults and converts an object, and fills what the API
// server fills on create; for an update, the resourceVersion the client
// sends back (the stored object's, here "1").
func decode(o Object, namespace string, create bool) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := decoder().Decode(o.Raw, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	if s, ok := strategies[gvk.GroupKind()]; ok && s.strategy.NamespaceScoped() && m.GetNamespace() == "" {
		m.SetNamespace(namespace)
	}
	if create {
		rest.FillObjectMetaSystemFields(m)
	} else {
		m.SetResourceVersion("1")
	}
	return obj, gvk, nil
}

// recorder collects the warnings a create or an update would return to
// kubectl.
type recorder []string

func (r *recorder) AddWarning(_, text string) { *r = append(*r, text) }
