package cli

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// verdict is what the client-side checks say of one node's change.
type verdict struct {
	// problems are the reasons for a refusal, the webhook's first when it
	// would refuse too; none means the change may go ahead.
	problems []string
	warnings []string
}

func (v verdict) refused() bool { return len(v.problems) > 0 }

// candidate is a ConfigMap about to be assigned, decoded and validated
// once for every node it goes to.
type candidate struct {
	ref contract.ConfigMapRef
	// cm is nil when the ConfigMap does not exist.
	cm *corev1.ConfigMap
	// judged is what the webhook judges; set when cm is eligible.
	judged  kubeletconfig.Candidate
	invalid field.ErrorList
}

func newCandidate(ref contract.ConfigMapRef, cm *corev1.ConfigMap) *candidate {
	c := &candidate{ref: ref, cm: cm}
	if cm == nil || !contract.IsEligible(cm.Labels) {
		return c
	}
	cfg, err := kubeletconfig.DecodeConfigMapKey(cm, contract.ConfigMapKey)
	c.judged = kubeletconfig.Candidate{ConfigMap: ref, Config: cfg, Err: err, Mutable: cm.Immutable == nil || !*cm.Immutable}
	if err == nil {
		c.invalid = kubeletconfig.Validate(cfg)
	}
	return c
}

// judge checks the assignment of the candidate to node. Where the webhook
// refuses (the config-content rule's strict decoding, the feature-gates rule's feature gates against the
// node's kubelet version) the judgement is the webhook's own
// (kubeletconfig.JudgeAssignment), worded as the webhook's answer words it.
// The client is stricter where the webhook lets an assignment through that
// the agent would then refuse to apply: a ConfigMap that does not exist, is
// not eligible, or does not validate.
func (c *candidate) judge(node *corev1.Node) verdict {
	var v verdict
	switch {
	case c.cm == nil:
		v.problems = append(v.problems, fmt.Sprintf("ConfigMap %s does not exist", c.ref))
		return v
	case !contract.IsEligible(c.cm.Labels):
		v.problems = append(v.problems, fmt.Sprintf("ConfigMap %s is not an eligible kubelet configuration: it lacks the label %s=%s, so no node may read it",
			c.ref, contract.EligibleLabel, contract.EligibleLabelValue))
		return v
	}
	judged := kubeletconfig.JudgeAssignment(c.judged, node.Name, node.Status.NodeInfo.KubeletVersion)
	if judged.Refused {
		v.problems = append(v.problems, judged.Refusal())
	}
	v.warnings = judged.Warnings
	if len(c.invalid) > 0 {
		v.problems = append(v.problems, fmt.Sprintf("ConfigMap %s holds an invalid KubeletConfiguration, which the agent would refuse to apply: %v", c.ref, kubeletconfig.Summarize(c.invalid)))
	}
	return v
}
