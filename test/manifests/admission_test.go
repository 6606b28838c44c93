package manifests

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

const (
	namespace      = "nodeguard"
	agentNamespace = "nodeguard-agent"
	agentName      = "nodeguard-agent"
	vwcName        = "nodeguard"
	maxTimeout     = 5
	namespaceLabel = "kubernetes.io/metadata.name"
	webhookPath    = "/validate"
	nodesResource  = "nodes"
	nodesStatus    = "nodes/status"
)

func webhookConfiguration(o objects) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return typed[admissionregistrationv1.ValidatingWebhookConfiguration](o, "ValidatingWebhookConfiguration", vwcName)
}

// eachWebhook runs check on every webhook, collecting the failures.
func eachWebhook(o objects, check func(admissionregistrationv1.ValidatingWebhook) error) error {
	cfg, err := webhookConfiguration(o)
	if err != nil {
		return err
	}
	if len(cfg.Webhooks) == 0 {
		return errors.New("the ValidatingWebhookConfiguration has no webhooks")
	}
	var errs []error
	for _, hook := range cfg.Webhooks {
		if err := check(hook); err != nil {
			errs = append(errs, fmt.Errorf("webhook %s: %w", hook.Name, err))
		}
	}
	return errors.Join(errs...)
}

func coversNamespaced(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, rule := range rules {
		if rule.Scope == nil || *rule.Scope != admissionregistrationv1.ClusterScope {
			return true
		}
	}
	return false
}

// checkNamespaceExemptions: a webhook that judges namespaced objects must not
// judge those in its own namespace or in kube-system, or an outage could
// lock out the means of repairing it. A selector that matches no namespace at
// all would pass that test and protect nothing, so it must match "default".
func checkNamespaceExemptions(o objects) error {
	checked := 0
	err := eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		if !coversNamespaced(hook.Rules) {
			return nil
		}
		checked++
		if hook.NamespaceSelector == nil {
			return errors.New("judges namespaced objects but has no namespaceSelector")
		}
		selector, err := metav1.LabelSelectorAsSelector(hook.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("namespaceSelector: %w", err)
		}
		for _, ns := range []string{namespace, "kube-system"} {
			if selector.Matches(labels.Set{namespaceLabel: ns}) {
				return fmt.Errorf("namespaceSelector %q does not exempt namespace %s", selector, ns)
			}
		}
		if !selector.Matches(labels.Set{namespaceLabel: "default"}) {
			return fmt.Errorf("namespaceSelector %q does not even match namespace default", selector)
		}
		return nil
	})
	if err == nil && checked == 0 {
		return errors.New("no webhook judges namespaced objects; the ConfigMap webhook is missing")
	}
	return err
}

// checkNodeStatusBesideNodes: a rule for "nodes" does not match
// "nodes/status", through which a node writes most of its Node.
func checkNodeStatusBesideNodes(o objects) error {
	found := false
	err := eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		for i, rule := range hook.Rules {
			hasNodes := slices.Contains(rule.Resources, nodesResource)
			hasStatus := slices.Contains(rule.Resources, nodesStatus) || slices.Contains(rule.Resources, "nodes/*")
			found = found || hasNodes
			if hasNodes != hasStatus {
				return fmt.Errorf("rules[%d] resources %v: list nodes and nodes/status together", i, rule.Resources)
			}
		}
		return nil
	})
	if err == nil && !found {
		return errors.New("no webhook rule names nodes")
	}
	return err
}

func checkTimeouts(o objects) error {
	return eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		// Unset means 10s, twice what a node write should wait on us.
		if hook.TimeoutSeconds == nil || *hook.TimeoutSeconds < 1 || *hook.TimeoutSeconds > maxTimeout {
			return fmt.Errorf("timeoutSeconds %v: want 1 to %d", ptrString(hook.TimeoutSeconds), maxTimeout)
		}
		return nil
	})
}

func checkSideEffectsNone(o objects) error {
	return eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		if hook.SideEffects == nil || *hook.SideEffects != admissionregistrationv1.SideEffectClassNone {
			return fmt.Errorf("sideEffects %v: want None", ptrString(hook.SideEffects))
		}
		return nil
	})
}

func checkReviewVersions(o objects) error {
	return eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		if !slices.Equal(hook.AdmissionReviewVersions, []string{"v1"}) {
			return fmt.Errorf("admissionReviewVersions %v: want [v1], the only version /validate speaks", hook.AdmissionReviewVersions)
		}
		return nil
	})
}

func checkFailClosed(o objects) error {
	return eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		if hook.FailurePolicy == nil || *hook.FailurePolicy != admissionregistrationv1.Fail {
			return fmt.Errorf("failurePolicy %v: want Fail, or taking the webhook down skips its rules", ptrString(hook.FailurePolicy))
		}
		return nil
	})
}

// checkClientConfig: every webhook calls /validate through a port of the
// webhook's Service (which checkService follows to the container).
func checkClientConfig(o objects) error {
	svc, err := typed[corev1.Service](o, "Service", webhookName)
	if err != nil {
		return err
	}
	return eachWebhook(o, func(hook admissionregistrationv1.ValidatingWebhook) error {
		ref := hook.ClientConfig.Service
		if hook.ClientConfig.URL != nil || ref == nil {
			return errors.New("clientConfig: want a service reference, not a URL")
		}
		if ref.Namespace != svc.Namespace || ref.Name != svc.Name {
			return fmt.Errorf("clientConfig.service %s/%s: want the Service %s/%s", ref.Namespace, ref.Name, svc.Namespace, svc.Name)
		}
		if ref.Path == nil || *ref.Path != webhookPath {
			return fmt.Errorf("clientConfig.service.path %v: want %s", ptrString(ref.Path), webhookPath)
		}
		port := int32(443)
		if ref.Port != nil {
			port = *ref.Port
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port }) {
			return fmt.Errorf("clientConfig.service.port %d is not a port of Service %s", port, svc.Name)
		}
		return nil
	})
}

// nodesWebhook is the webhook whose rules name nodes.
func nodesWebhook(o objects) (*admissionregistrationv1.ValidatingWebhook, error) {
	cfg, err := webhookConfiguration(o)
	if err != nil {
		return nil, err
	}
	for i, hook := range cfg.Webhooks {
		for _, rule := range hook.Rules {
			if slices.Contains(rule.Resources, nodesResource) {
				return &cfg.Webhooks[i], nil
			}
		}
	}
	return nil, errors.New("no webhook for nodes")
}

// compileMatchConditions compiles a webhook's matchConditions as
// kube-apiserver's admission plugin does.
func compileMatchConditions(hook *admissionregistrationv1.ValidatingWebhook) (matchconditions.Matcher, error) {
	if len(hook.MatchConditions) == 0 {
		return nil, errors.New("no matchConditions")
	}
	expressions := make([]celplugin.ExpressionAccessor, len(hook.MatchConditions))
	for i, condition := range hook.MatchConditions {
		expressions[i] = &matchconditions.MatchCondition{Name: condition.Name, Expression: condition.Expression}
	}
	compiler := celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	evaluator := compiler.CompileCondition(expressions, celplugin.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	if errs := evaluator.CompilationErrors(); len(errs) > 0 {
		return nil, fmt.Errorf("matchConditions do not compile: %w", errors.Join(errs...))
	}
	return matchconditions.NewMatcher(evaluator, hook.FailurePolicy, "webhook", "validating", hook.Name), nil
}

// nodeWrite is one write to a Node, and whether the nodes webhook must see it.
type nodeWrite struct {
	name              string
	user              user.Info
	operation         admission.Operation
	subresource       string
	oldObject, object *corev1.Node
	wantMatch         bool
}

func nodeWith(annotation string) *corev1.Node {
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{contract.PoolLabel: "blue"}}}
	if annotation != "" {
		node.Annotations = map[string]string{contract.ConfigSourceAnnotation: annotation}
	}
	return node
}

func relabelled(node *corev1.Node) *corev1.Node {
	node = node.DeepCopy()
	node.Labels[contract.PoolLabel] = "green"
	return node
}

// heartbeat is a kubelet's routine status write: a condition's heartbeat.
func heartbeat(node *corev1.Node) *corev1.Node {
	node = node.DeepCopy()
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now()})
	node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	return node
}

// changed returns a copy of node with mutate applied.
func changed(node *corev1.Node, mutate func(*corev1.Node)) *corev1.Node {
	node = node.DeepCopy()
	mutate(node)
	return node
}

func annotated(node *corev1.Node, key, value string) *corev1.Node {
	return changed(node, func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	})
}

func withVersion(node *corev1.Node, v string) *corev1.Node {
	return changed(node, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v })
}

var (
	kubelet = &user.DefaultInfo{Name: "system:node:node-a", Groups: []string{"system:nodes", "system:authenticated"}}
	admin   = &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}
)

// nodeWrites are the cases the nodes webhook's matchConditions must get
// right, for each rule of docs/reference.md: a node's registration (rules 1-4), an
// assignment set or changed by anyone and a changed kubelet version (rules
// 3 and 5), a node's change of its labels, taints or ownerReferences (rule
// 2); and nothing else, so that a kubelet's routine status writes and an
// administrator's routine edits never wait on, or fail with, the webhook.
// standalone is what the standalone overlay must send instead, for
// clusters without NodeRestriction: every write by a node.
var nodeWrites = []struct {
	nodeWrite
	standalone bool
}{
	{nodeWrite{name: "a node's routine status write", user: kubelet, operation: admission.Update, subresource: "status", oldObject: withVersion(nodeWith(""), "v1.37.2"), object: heartbeat(withVersion(nodeWith(""), "v1.37.2"))}, true},
	{nodeWrite{name: "a node's routine write of an assigned Node", user: kubelet, operation: admission.Update, subresource: "status", oldObject: nodeWith("cfg/a"), object: heartbeat(nodeWith("cfg/a"))}, true},
	{nodeWrite{name: "a node relabels itself", user: kubelet, operation: admission.Update, subresource: "status", oldObject: nodeWith(""), object: relabelled(nodeWith("")), wantMatch: true}, true},
	{nodeWrite{name: "a node registers", user: kubelet, operation: admission.Create, object: nodeWith(""), wantMatch: true}, true},
	{nodeWrite{name: "a node deletes itself", user: kubelet, operation: admission.Delete, oldObject: nodeWith("")}, true},
	{nodeWrite{name: "a node assigns itself", user: kubelet, operation: admission.Update, oldObject: nodeWith(""), object: nodeWith("cfg/a"), wantMatch: true}, true},
	{nodeWrite{name: "a node clears its assignment", user: kubelet, operation: admission.Update, oldObject: nodeWith("cfg/a"), object: nodeWith(""), wantMatch: true}, true},
	{nodeWrite{name: "a node forges its previous config source", user: kubelet, operation: admission.Update, oldObject: nodeWith(""),
		object: annotated(nodeWith(""), contract.PreviousConfigSourceAnnotation, "cfg/a"), wantMatch: true}, true},
	{nodeWrite{name: "a node empties its previous config source", user: kubelet, operation: admission.Update, oldObject: nodeWith(""),
		object: annotated(nodeWith(""), contract.PreviousConfigSourceAnnotation, ""), wantMatch: true}, true},
	{nodeWrite{name: "a node forges a passed trial", user: kubelet, operation: admission.Update, subresource: "status", oldObject: nodeWith("cfg/a"),
		object: annotated(nodeWith("cfg/a"), contract.TrialPassedAnnotation, "cfg/a@1"), wantMatch: true}, true},
	{nodeWrite{name: "a node labels itself into a pool", user: kubelet, operation: admission.Update, oldObject: changed(nodeWith(""), func(n *corev1.Node) { delete(n.Labels, contract.PoolLabel) }),
		object: nodeWith(""), wantMatch: true}, true},
	{nodeWrite{name: "a node drops its rollout", user: kubelet, operation: admission.Update, subresource: "status",
		oldObject: annotated(nodeWith("cfg/a"), contract.RolloutAnnotation, "pool"), object: nodeWith("cfg/a"), wantMatch: true}, true},
	{nodeWrite{name: "a node's routine write of a Node a rollout moved", user: kubelet, operation: admission.Update, subresource: "status",
		oldObject: annotated(annotated(nodeWith("cfg/a"), contract.RolloutAnnotation, "pool"), contract.PreviousConfigSourceAnnotation, ""),
		object:    heartbeat(annotated(annotated(nodeWith("cfg/a"), contract.RolloutAnnotation, "pool"), contract.PreviousConfigSourceAnnotation, ""))}, true},
	{nodeWrite{name: "the rollout controller writes its bookkeeping", user: admin, operation: admission.Update, oldObject: nodeWith("cfg/a"),
		object: annotated(nodeWith("cfg/a"), contract.PreviousConfigSourceAnnotation, "cfg/b")}, false},
	{nodeWrite{name: "a node changes its taints", user: kubelet, operation: admission.Update, oldObject: nodeWith(""),
		object: changed(nodeWith(""), func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} }), wantMatch: true}, true},
	{nodeWrite{name: "a node changes its ownerReferences", user: kubelet, operation: admission.Update, oldObject: nodeWith(""),
		object: changed(nodeWith(""), func(n *corev1.Node) {
			n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}}
		}), wantMatch: true}, true},
	{nodeWrite{name: "a node sets a legacy configSource", user: kubelet, operation: admission.Update, oldObject: nodeWith(""),
		object: changed(nodeWith(""), func(n *corev1.Node) {
			n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "cfg", Name: "a", KubeletConfigKey: "kubelet"}}
		}), wantMatch: true}, true},
	{nodeWrite{name: "a node reports another kubelet version", user: kubelet, operation: admission.Update, subresource: "status",
		oldObject: withVersion(nodeWith("cfg/a"), "v1.37.2"), object: withVersion(nodeWith("cfg/a"), "v1.36.0"), wantMatch: true}, true},
	{nodeWrite{name: "an admin relabels a node", user: admin, operation: admission.Update, oldObject: nodeWith(""), object: relabelled(nodeWith(""))}, false},
	{nodeWrite{name: "an admin relabels an assigned node", user: admin, operation: admission.Update, oldObject: nodeWith("cfg/a"), object: relabelled(nodeWith("cfg/a"))}, false},
	{nodeWrite{name: "an admin taints a node", user: admin, operation: admission.Update, oldObject: nodeWith(""),
		object: changed(nodeWith(""), func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} })}, false},
	{nodeWrite{name: "an admin creates a node", user: admin, operation: admission.Create, object: nodeWith("")}, false},
	{nodeWrite{name: "an admin deletes a node", user: admin, operation: admission.Delete, oldObject: nodeWith("cfg/a")}, false},
	{nodeWrite{name: "an admin clears an assignment", user: admin, operation: admission.Update, oldObject: nodeWith("cfg/a"), object: nodeWith("")}, false},
	{nodeWrite{name: "an admin assigns", user: admin, operation: admission.Update, oldObject: nodeWith(""), object: nodeWith("cfg/a"), wantMatch: true}, true},
	{nodeWrite{name: "an admin reassigns", user: admin, operation: admission.Update, oldObject: nodeWith("cfg/a"), object: nodeWith("cfg/b"), wantMatch: true}, true},
	{nodeWrite{name: "an admin creates an assigned node", user: admin, operation: admission.Create, object: nodeWith("cfg/a"), wantMatch: true}, true},
}

func (w nodeWrite) attributes() *admission.VersionedAttributes {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	var object, oldObject runtime.Object
	if w.object != nil {
		object = w.object
	}
	if w.oldObject != nil {
		oldObject = w.oldObject
	}
	return writeAttributes(object, oldObject, gvk, schema.GroupVersionResource{Version: "v1", Resource: nodesResource}, "node-a", w.subresource, w.operation, w.user)
}

// writeAttributes is a cluster-scoped write as kube-apiserver hands it to a
// webhook's matchConditions. A missing object must be a nil interface, not a
// typed nil.
func writeAttributes(object, oldObject runtime.Object, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource,
	name, subresource string, operation admission.Operation, u user.Info) *admission.VersionedAttributes {
	attrs := admission.NewAttributesRecord(object, oldObject, gvk, "", name, gvr, subresource, operation, nil, false, u)
	return &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk,
		VersionedObject: admission.NewLazyObject(object), VersionedOldObject: admission.NewLazyObject(oldObject)}
}

// checkNodeMatchConditions: the nodes webhook has matchConditions, they
// compile as kube-apiserver compiles them, and they pick the right writes.
func checkNodeMatchConditions(o objects) error { return checkNodeWrites(o, false) }

// checkStandaloneMatchConditions is checkNodeMatchConditions for the
// standalone overlay.
func checkStandaloneMatchConditions(o objects) error { return checkNodeWrites(o, true) }

func checkNodeWrites(o objects, standalone bool) error {
	hook, err := nodesWebhook(o)
	if err != nil {
		return err
	}
	matcher, err := compileMatchConditions(hook)
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range append(slices.Clone(nodeWrites), bookkeepingWrites()...) {
		result := matcher.Match(context.Background(), w.attributes(), nil, nil)
		if result.Error != nil {
			errs = append(errs, fmt.Errorf("%s: matchConditions failed: %w", w.name, result.Error))
			continue
		}
		want := w.wantMatch
		if standalone {
			want = w.standalone
		}
		if result.Matches != want {
			errs = append(errs, fmt.Errorf("%s: reaches the webhook %v, want %v", w.name, result.Matches, want))
		}
	}
	return errors.Join(errs...)
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "<unset>"
	}
	return fmt.Sprint(*p)
}

// rolloutsWebhook is the webhook whose rules name kubeletconfigrollouts.
func rolloutsWebhook(o objects) (*admissionregistrationv1.ValidatingWebhook, error) {
	cfg, err := webhookConfiguration(o)
	if err != nil {
		return nil, err
	}
	for i, hook := range cfg.Webhooks {
		for _, rule := range hook.Rules {
			if slices.Contains(rule.APIGroups, v1alpha1.GroupName) && slices.Contains(rule.Resources, "kubeletconfigrollouts") {
				return &cfg.Webhooks[i], nil
			}
		}
	}
	return nil, errors.New("no webhook for kubeletconfigrollouts: the rollout selector rule would never run")
}

// rolloutObject is a KubeletConfigRollout as the apiserver hands a custom
// resource to admission: unstructured.
func rolloutObject(selector map[string]any, paused bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "KubeletConfigRollout",
		"metadata": map[string]any{"name": "pool-blue"},
		"spec": map[string]any{"nodeSelector": selector, "paused": paused,
			"configMapRef": map[string]any{"namespace": "kubelet-configs", "name": "pool-blue"}},
	}}
}

// checkRolloutSelectorWebhook: every creation of a rollout and every change
// of its nodeSelector reaches the webhook, for everyone, and fails closed;
// nothing else of a rollout's life waits on it.
func checkRolloutSelectorWebhook(o objects) error {
	hook, err := rolloutsWebhook(o)
	if err != nil {
		return err
	}
	var errs []error
	for i, rule := range hook.Rules {
		if !slices.Contains(rule.Operations, admissionregistrationv1.Create) || !slices.Contains(rule.Operations, admissionregistrationv1.Update) {
			errs = append(errs, fmt.Errorf("rules[%d] operations %v: want CREATE and UPDATE", i, rule.Operations))
		}
	}
	matcher, err := compileMatchConditions(hook)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	pool := map[string]any{"matchLabels": map[string]any{contract.PoolLabel: "blue"}}
	writable := map[string]any{"matchLabels": map[string]any{"pool": "blue"}}
	gvk := v1alpha1.SchemeGroupVersion.WithKind("KubeletConfigRollout")
	for _, w := range []struct {
		name              string
		user              user.Info
		operation         admission.Operation
		subresource       string
		object, oldObject runtime.Object
		want              bool
	}{
		{"an administrator creates a rollout", admin, admission.Create, "", rolloutObject(writable, false), nil, true},
		{"an administrator changes the selector", admin, admission.Update, "", rolloutObject(writable, false), rolloutObject(pool, false), true},
		{"an administrator pauses a rollout", admin, admission.Update, "", rolloutObject(writable, true), rolloutObject(writable, false), false},
		{"the controller writes the status", admin, admission.Update, "status", rolloutObject(pool, false), rolloutObject(pool, false), false},
	} {
		result := matcher.Match(context.Background(), writeAttributes(w.object, w.oldObject, gvk,
			v1alpha1.SchemeGroupVersion.WithResource("kubeletconfigrollouts"), "pool-blue", w.subresource, w.operation, w.user), nil, nil)
		switch {
		case result.Error != nil:
			errs = append(errs, fmt.Errorf("%s: matchConditions failed: %w", w.name, result.Error))
		case result.Matches != w.want:
			errs = append(errs, fmt.Errorf("%s: reaches the webhook %v, want %v", w.name, result.Matches, w.want))
		}
	}
	return errors.Join(errs...)
}
