package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// maxNodesInMessage keeps a refusal readable when a pool is large.
const maxNodesInMessage = 10

// admitConfigMap is the config-content rule: an eligible ConfigMap must hold
// a valid KubeletConfiguration that sets no field the settings forbid to
// change dynamically and breaks feature-gates for no node it is assigned to.
func (a *Admitter) admitConfigMap(_ context.Context, req *Request, settings *settings.Settings) Result {
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
	case admissionv1.Delete:
		return a.warnDeletingAssigned(req)
	default:
		return allow()
	}
	cm, _ := req.Obj.(*corev1.ConfigMap)
	if cm == nil {
		return refuse(RuleMalformed, "%s of a ConfigMap without the object", req.Operation)
	}
	if !contract.IsEligible(cm.Labels) {
		return allow()
	}
	oldCM, _ := req.OldObj.(*corev1.ConfigMap)
	if req.Operation == admissionv1.Update && oldCM == nil {
		return refuse(RuleMalformed, "UPDATE of a ConfigMap without the old object")
	}
	if cm.Namespace == "" {
		cm.Namespace = req.Namespace
	}
	ref := contract.ConfigMapRef{Namespace: cm.Namespace, Name: cm.Name}

	checked, err := a.configs.CheckConfigMapKey(cm, contract.ConfigMapKey)
	if err == nil && checked.Err != nil {
		err = kubeletconfig.ConfigMapError(cm.Namespace, cm.Name, contract.ConfigMapKey, checked.Err)
	}
	if err != nil {
		return refuse(contract.RuleConfigContent, "eligible ConfigMap %s must hold a valid KubeletConfiguration: %v", ref, err)
	}
	if len(checked.Invalid) > 0 {
		return refuse(contract.RuleConfigContent, "eligible ConfigMap %s holds an invalid KubeletConfiguration: %v", ref, kubeletconfig.Summarize(checked.Invalid))
	}
	cfg := checked.Config
	if len(settings.ForbiddenDynamicFields) > 0 {
		// An old configuration that does not decode (it may predate the
		// webhook) is judged as none.
		if changed := forbiddenChanges(settings, a.eligibleConfig(oldCM), cfg); len(changed) > 0 {
			return refuse(contract.RuleConfigContent, "eligible ConfigMap %s may not set or change %s: the policy forbids changing them dynamically (forbiddenDynamicFields)",
				ref, strings.Join(changed, ", "))
		}
	}
	return a.checkAssignedNodes(ref, cfg)
}

// checkAssignedNodes is config-content's last check: the edit must not break feature-gates
// for any node the ConfigMap is assigned to, a node already running it. A node
// whose reported version is not trusted (see KubeletVersions) does not get
// a say: it is named in a warning, and the configuration must only be one
// that some kubelet nodeguard knows can run.
func (a *Admitter) checkAssignedNodes(ref contract.ConfigMapRef, cfg *kubeletconfigv1beta1.KubeletConfiguration) Result {
	var broken, marked []string
	var first, detail string
	var unchecked int
	// A pool runs a handful of kubelet versions: check each once.
	verdicts := map[string]field.ErrorList{}
	for _, name := range a.graph.NodesAssignedTo(ref.Namespace, ref.Name) {
		info, ok := a.graph.Node(name)
		if !ok {
			unchecked++
			continue
		}
		if why := a.versions.distrust(name, info.KubeletVersion, info.ParsedKubeletVersion); why != "" {
			marked = append(marked, name+" ("+why+")")
			continue
		}
		errs, checked := verdicts[info.KubeletVersion]
		if !checked {
			errs = kubeletconfig.CheckFeatureGates(cfg, info.ParsedKubeletVersion)
			verdicts[info.KubeletVersion] = errs
		}
		if len(errs) > 0 {
			// The graph lists nodes in no order: name the first by name,
			// so that a refusal reads the same every time.
			if first == "" || name < first {
				first, detail = name, fmt.Sprintf("node %s (kubelet %s): %v", name, info.KubeletVersion, kubeletconfig.Summarize(errs))
			}
			broken = append(broken, name)
		}
	}
	if len(broken) > 0 {
		return refuse(contract.RuleConfigContent, "ConfigMap %s is assigned to nodes whose kubelets cannot run it: %s; first: %s",
			ref, listNodes(broken), detail)
	}
	var warnings []string
	if len(marked) > 0 {
		slices.Sort(marked)
		if errs := kubeletconfig.CheckEveryKnownKubelet(cfg); len(errs) > 0 {
			return refuse(contract.RuleConfigContent, "ConfigMap %s is assigned to nodes whose reported kubelet version is not trusted (%s), and no kubelet nodeguard knows (%s) can run it: %v",
				ref, listNodes(marked), kubeletconfig.KnownKubelets(), kubeletconfig.Summarize(errs))
		}
		warnings = append(warnings, fmt.Sprintf("ConfigMap %s: nodes whose reported kubelet version is not trusted were judged against every kubelet nodeguard knows (%s), not their own: %s",
			ref, kubeletconfig.KnownKubelets(), listNodes(marked)))
	}
	if unchecked > 0 {
		warnings = append(warnings, fmt.Sprintf("%d node(s) assigned %s are not known yet; their feature gates were not checked", unchecked, ref))
	}
	return allow(warnings...)
}

// eligibleConfig is the configuration of an eligible ConfigMap, or nil
// when it is not eligible or does not decode.
func (a *Admitter) eligibleConfig(cm *corev1.ConfigMap) *kubeletconfigv1beta1.KubeletConfiguration {
	if cm == nil || !contract.IsEligible(cm.Labels) {
		return nil
	}
	checked, err := a.configs.CheckConfigMapKey(cm, contract.ConfigMapKey)
	if err != nil || checked.Err != nil {
		return nil
	}
	return checked.Config
}

// forbiddenChanges lists the forbidden fields cfg sets or changes from
// previous; a ConfigMap that only now becomes eligible, or whose old content
// does not decode (it may predate the webhook), has no previous and is
// judged like a new one. The node agent applies the same function, to each
// configuration as a new one.
func forbiddenChanges(settings *settings.Settings, previous, cfg *kubeletconfigv1beta1.KubeletConfiguration) []string {
	return hardening.Forbidden(settings.ForbiddenDynamicFields, previous, cfg)
}

func (a *Admitter) warnDeletingAssigned(req *Request) Result {
	nodes := a.graph.NodesAssignedTo(req.Namespace, req.Name)
	if len(nodes) == 0 {
		return allow()
	}
	return allow(fmt.Sprintf("ConfigMap %s/%s is assigned to %s; they keep running their last-known-good configuration until reassigned",
		req.Namespace, req.Name, listNodes(nodes)))
}

func listNodes(nodes []string) string {
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	if len(nodes) <= maxNodesInMessage {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:maxNodesInMessage], ", "), len(nodes)-maxNodesInMessage)
}
