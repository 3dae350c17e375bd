package activities

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// WarmSecretCache watches runnerflow's Secrets in the warm namespace, so a warm runner's start
// (StartWarmRunner) reads its warm Secret from memory: a burst of 500 warm starts then makes
// two requests each under the client's rate limit (its own Secret, its pod) instead of three.
// The worker runs one only when warm registrations wait in a namespace of their own. Its Role
// there lists and watches Secrets (deploy/rbac.yaml); without those rights the cache stays
// empty and every start asks the API server, as it would with no cache.
type WarmSecretCache struct {
	factory informers.SharedInformerFactory
	lister  corelisters.SecretLister
	synced  cache.InformerSynced
}

// NewWarmSecretCache makes the cache of namespace's runnerflow Secrets; Run fills it.
func NewWarmSecretCache(client kubernetes.Interface, namespace string) *WarmSecretCache {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = runnerpod.LabelManagedBy + "=" + runnerpod.ManagedByValue
		}))
	secrets := factory.Core().V1().Secrets()
	return &WarmSecretCache{factory: factory, lister: secrets.Lister(), synced: secrets.Informer().HasSynced}
}

// Lister is the cache's reader (KubernetesActivities.WarmSecrets); nil for no cache.
func (c *WarmSecretCache) Lister() corelisters.SecretLister {
	if c == nil {
		return nil
	}
	return c.lister
}

// Run fills and follows the cache until ctx ends. It does not wait for the first list: until
// the cache holds a Secret, its reader asks the API server.
func (c *WarmSecretCache) Run(ctx context.Context) {
	if c == nil {
		return
	}
	c.factory.Start(ctx.Done())
	<-ctx.Done()
	c.factory.Shutdown()
}

// WaitForSync waits until the cache holds what its first list returned (Run started it), or
// ctx ends; it says whether it does.
func (c *WarmSecretCache) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.synced)
}
