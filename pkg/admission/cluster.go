package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Cluster is what NodeRestriction's rules read beside the request: the
// objects a node's write points at (the pod a token is bound to, the Node a
// mirror pod is owned by, ...) and, for the rules that defer to them, the
// apiserver's authorizers. The in-tree plugin reads the apiserver's own
// informers; the webhook asks the apiserver (APICluster). Only the rules
// of the standalone manifests call it, and only for the few writes whose
// request does not carry what they judge, so a cluster that runs
// NodeRestriction never pays for it.
type Cluster interface {
	Node(ctx context.Context, name string) (*corev1.Node, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	// Authorize asks whether user may do attrs, as NodeRestriction asks
	// its authorizer for the verbs that widen a node's rights
	// (request-serviceaccounts-token-audience, ...). An error with a
	// false answer refuses.
	Authorize(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error)
	// APIAudiences are the apiserver's own audiences (--api-audiences,
	// by default its service account issuer). A TokenRequest that names
	// no audience reaches NodeRestriction as it was sent, but reaches a
	// validating webhook with these filled in: the webhook must read them
	// as "no audience".
	APIAudiences(ctx context.Context) ([]string, error)
}

// APICluster reads the cluster from the apiserver, one request per lookup:
// the writes that need a lookup (a service account token, an eviction, a
// mirror pod, a pod certificate) are a small share of a node's writes, and
// a live read is never behind the write it judges, where an informer can
// be. It needs get on Nodes, Pods, ServiceAccounts, PersistentVolumeClaims,
// PersistentVolumes and CSIDrivers, and create on SubjectAccessReviews
// (manifests/components/standalone).
type APICluster struct {
	Client kubernetes.Interface
	// Audiences are the apiserver's --api-audiences; empty means its
	// default, the issuer its service account discovery document names,
	// read once.
	Audiences []string

	mu         sync.Mutex
	discovered []string
}

// NewAPICluster reads the cluster through client; audiences as in
// APICluster.
func NewAPICluster(client kubernetes.Interface, audiences []string) *APICluster {
	return &APICluster{Client: client, Audiences: slices.Clone(audiences)}
}

var _ Cluster = (*APICluster)(nil)

func (c *APICluster) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (c *APICluster) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c *APICluster) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return c.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c *APICluster) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c *APICluster) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return c.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (c *APICluster) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	return c.Client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
}

func (c *APICluster) Authorize(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			ResourceAttributes: &attrs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the apiserver whether %s may %s %s: %w", user.Username, attrs.Verb, attrs.Resource, err)
	}
	if review.Status.EvaluationError != "" && !review.Status.Allowed {
		return false, fmt.Errorf("the apiserver could not decide whether %s may %s %s: %s", user.Username, attrs.Verb, attrs.Resource, review.Status.EvaluationError)
	}
	return review.Status.Allowed, nil
}

// APIAudiences is Audiences, or the issuer of the apiserver's service
// account discovery document (/.well-known/openid-configuration, which
// RBAC lets every service account read), the default of --api-audiences.
// A failed read is tried again on the next call.
func (c *APICluster) APIAudiences(ctx context.Context) ([]string, error) {
	if len(c.Audiences) > 0 {
		return c.Audiences, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.discovered != nil {
		return c.discovered, nil
	}
	raw, err := c.Client.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's audiences from its service account issuer discovery (set --api-audiences to name them): %w", err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding the apiserver's service account issuer discovery document: %w", err)
	}
	if doc.Issuer == "" {
		return nil, errors.New("the apiserver's service account issuer discovery document names no issuer (set --api-audiences)")
	}
	c.discovered = []string{doc.Issuer}
	return c.discovered, nil
}

// noCluster answers every lookup with an error: an Admitter without a
// Cluster refuses the writes that need one rather than guess.
type noCluster struct{}

var errNoCluster = fmt.Errorf("this webhook was started without access to the cluster's state, which this rule needs")

func (noCluster) Node(context.Context, string) (*corev1.Node, error) { return nil, errNoCluster }
func (noCluster) Pod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, errNoCluster
}
func (noCluster) ServiceAccount(context.Context, string, string) (*corev1.ServiceAccount, error) {
	return nil, errNoCluster
}
func (noCluster) PersistentVolumeClaim(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) {
	return nil, errNoCluster
}
func (noCluster) PersistentVolume(context.Context, string) (*corev1.PersistentVolume, error) {
	return nil, errNoCluster
}
func (noCluster) CSIDriver(context.Context, string) (*storagev1.CSIDriver, error) {
	return nil, errNoCluster
}
func (noCluster) Authorize(context.Context, authenticationv1.UserInfo, authorizationv1.ResourceAttributes) (bool, error) {
	return false, errNoCluster
}
func (noCluster) APIAudiences(context.Context) ([]string, error) { return nil, errNoCluster }
