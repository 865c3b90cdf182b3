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
	strategy rest.RESTCreateStrategy
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
// namespace: decode, default, fill the system fields, then rest.BeforeCreate
// (the namespace check, the strategy's preparation, its validation, the
// object metadata's validation, declarative validation and the warnings).
func validateBuiltin(o Object, namespace string) error {
	obj, gvk, err := decoder().Decode(o.Raw, nil, nil)
	if err != nil {
		return err
	}
	s, ok := strategies[gvk.GroupKind()]
	strategy := s.strategy
	if !ok {
		return fmt.Errorf("no validation for %s here: add its strategy to chartcheck", gvk)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if strategy.NamespaceScoped() && m.GetNamespace() == "" {
		m.SetNamespace(namespace)
	}
	rest.FillObjectMetaSystemFields(m)
	var w recorder
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIGroup: gvk.Group, APIVersion: gvk.Version,
		Namespace: namespace, Resource: s.resource, Name: m.GetName(),
	})
	ctx = warning.WithWarningRecorder(ctx, &w)
	if err := rest.BeforeCreate(strategy, ctx, obj); err != nil {
		return err
	}
	if len(w) > 0 {
		return errors.New("the API server would warn: " + strings.Join(w, "; "))
	}
	return nil
}

// recorder collects the warnings a create would return to kubectl.
type recorder []string

func (r *recorder) AddWarning(_, text string) { *r = append(*r, text) }
