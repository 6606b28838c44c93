package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const (
	// shadowedNode runs its kubelet with shadowingFlag on its command line,
	// as a kubelet's extra arguments often set: a flag wins over every
	// configuration file.
	shadowedNode  = "node-3"
	shadowingFlag = "--max-pods=58"
	// shadowedConfig asks for what the flag overrides.
	shadowedConfigName = "pool-green"
	shadowedConfig     = "maxPods: 120\n"
)

// kubeletArgs are the extra kubelet flags of a demonstration node.
func kubeletArgs(node string) []string {
	if node == shadowedNode {
		return []string{shadowingFlag}
	}
	return nil
}

// flagShadowsAssignment is part 5: what "active" means. A configuration is
// active once the kubelet runs it, by its own /configz: node-3's kubelet
// has a flag that wins over the file the agent writes, so the assignment
// fails its trial naming the field, both values and the flag, and is
// rolled back. An operator reads the same /configz through the apiserver.
func (s *story) flagShadowsAssignment(ctx context.Context) error {
	s.c.chapter("5. What active means: a kubelet flag that shadows the assignment")
	s.c.step("%s's kubelet runs with %s on its command line (a kubelet's extra arguments often carry such flags); a flag\n"+
		"    wins over every configuration file. Its configuration as it runs, through the apiserver as on any cluster:", shadowedNode, shadowingFlag)
	if err := s.rawConfigz(ctx, shadowedNode, "maxPods", "cpuManagerPolicy"); err != nil {
		return err
	}
	s.c.step("creating ConfigMap %s/%s: %s", configNamespace, shadowedConfigName, strings.TrimSpace(shadowedConfig))
	cm, err := s.createConfig(ctx, shadowedConfigName, shadowedConfig, nil)
	if err != nil {
		return err
	}
	if err := s.kubectl(ctx, "assign", configNamespace+"/"+cm.Name, shadowedNode); err != nil {
		return err
	}
	s.c.detail("its agent writes maxPods: 120 and restarts the kubelet; before the trial can pass it reads the kubelet's /configz (with\n" +
		"    the node's own credentials: nodeguard's authorizer lets a node read its own kubelet's configuration, and no other's)")
	node := s.node(shadowedNode)
	var report framework.Report
	if err := s.c.slow(ctx, "waiting for "+shadowedNode+"'s trial", func(ctx context.Context) error {
		report, err = node.WaitReport(ctx, waitTimeout, shadowedNode+" to roll back", func(r framework.Report) bool {
			return framework.RefersTo(r.Status.Assigned, cm) && r.Status.Active == nil && r.ConditionIs(corev1.ConditionFalse, contract.ReasonRolledBack)
		})
		return err
	}); err != nil {
		return err
	}
	if !strings.Contains(report.Status.Error, "set by the kubelet's command line: "+shadowingFlag) {
		return fmt.Errorf("%s's status does not name the flag: %s", shadowedNode, report.Status.Error)
	}
	if err := s.kubectl(ctx, "status", shadowedNode, "-o", "wide"); err != nil {
		return err
	}
	s.c.detail("%s: %s", shadowedNode, report.Condition.Message)
	s.c.detail("%s: never reported active: the file said 120, the kubelet ran 58; rolled back to its local configuration", shadowedNode)
	if err := s.showCapacity(ctx, []*framework.Node{node}, 58); err != nil {
		return err
	}
	return s.rawConfigz(ctx, shadowedNode, "maxPods")
}

// rawConfigz shows, as `kubectl get --raw` would, the named fields of the
// configuration a node's kubelet runs, read through the apiserver's proxy
// with the administrator's credentials.
func (s *story) rawConfigz(ctx context.Context, node string, fields ...string) error {
	path := "/api/v1/nodes/" + node + "/proxy/configz"
	s.c.printf("$ kubectl get --raw %s\n", path)
	// A kubelet just restarted answers once it serves again.
	var raw []byte
	err := framework.Eventually(ctx, waitTimeout, "the kubelet of "+node+" to answer "+path, func(ctx context.Context) (bool, string, error) {
		var err error
		raw, err = s.admin.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return err
	}
	var answer struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || answer.KubeletConfig == nil {
		return fmt.Errorf("GET %s: not a /configz answer (%v): %.200s", path, err, raw)
	}
	var shown []string
	for _, field := range fields {
		value, err := json.Marshal(answer.KubeletConfig[field])
		if err != nil {
			return err
		}
		shown = append(shown, fmt.Sprintf("%q:%s", field, value))
	}
	s.c.printf("{\"kubeletconfig\":{...,%s,...}}   (%d fields in all)\n", strings.Join(shown, ",...,"), len(answer.KubeletConfig))
	return nil
}
