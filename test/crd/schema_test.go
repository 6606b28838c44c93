package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/manifests"
)

var rollouts = v1alpha1.SchemeGroupVersion.WithResource("kubeletconfigrollouts")

// referenceExample is the KubeletConfigRollout example of docs/reference.md
// ("Pool rollouts"): the first YAML block there of that kind. It selects on
// nodeguard.dev/pool, a label no node may set on itself, as admission's
// rollout selector rule requires, so it is a rollout a cluster with
// nodeguard takes, and the CRD must take it too.
func referenceExample(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "\nkind: KubeletConfigRollout\n") {
			return block
		}
	}
	t.Fatal("docs/reference.md has no YAML block of kind KubeletConfigRollout")
	return ""
}

// TestSchema serves the CRD from a real kube-apiserver and creates
// rollouts against it: docs/reference.md's example and other good specs are
// taken, every kind of bad spec is refused with a message naming what is
// wrong.
func TestSchema(t *testing.T) {
	client, cfg := serveCRD(t)
	create := func(name string, spec map[string]any) (*unstructured.Unstructured, error) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.SchemeGroupVersion.String(),
			"kind":       "KubeletConfigRollout",
			"metadata":   map[string]any{"name": name},
			"spec":       spec,
		}}
		return client.Resource(rollouts).Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	}

	t.Run("the reference's example is taken", func(t *testing.T) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(referenceExample(t)), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Resource(rollouts).Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatal(err)
		}
		// The status subresource takes the example's status; creating
		// ignored it.
		got, err := client.Resource(rollouts).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The example leaves out what every metav1.Condition carries.
		status := obj.Object["status"].(map[string]any)
		status["conditions"].([]any)[0].(map[string]any)["lastTransitionTime"] = "2026-01-02T03:04:05Z"
		got.Object["status"] = status
		if _, err := client.Resource(rollouts).UpdateStatus(t.Context(), got, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatalf("writing the example's status: %v", err)
		}
	})

	t.Run("what the spec leaves out is defaulted", func(t *testing.T) {
		got, err := create("defaults", goodSpec())
		if err != nil {
			t.Fatal(err)
		}
		spec, _, _ := unstructured.NestedMap(got.Object, "spec")
		for field, want := range map[string]any{"canary": int64(1), "maxUnavailable": int64(1), "onFailure": "Revert", "drain": "Auto"} {
			if spec[field] != want {
				t.Errorf("spec.%s = %v (%T), want %v", field, spec[field], spec[field], want)
			}
		}
	})

	good := []struct {
		name string
		edit func(spec map[string]any)
	}{
		{"max-unavailable-percent", func(s map[string]any) { s["maxUnavailable"] = "25%" }},
		{"max-unavailable-1-percent", func(s map[string]any) { s["maxUnavailable"] = "1%" }},
		{"max-unavailable-100-percent", func(s map[string]any) { s["maxUnavailable"] = "100%" }},
		{"max-unavailable-many", func(s map[string]any) { s["maxUnavailable"] = 40 }},
		{"canary-many", func(s map[string]any) { s["canary"] = 5 }},
		{"halt", func(s map[string]any) { s["onFailure"] = "Halt" }},
		{"drain-auto", func(s map[string]any) { s["drain"] = "Auto" }},
		{"drain-always", func(s map[string]any) { s["drain"] = "Always" }},
		{"drain-never", func(s map[string]any) { s["drain"] = "Never" }},
		{"paused", func(s map[string]any) { s["paused"] = true }},
		{"match-expressions", func(s map[string]any) {
			s["nodeSelector"] = map[string]any{"matchExpressions": []any{
				map[string]any{"key": "nodeguard.dev/pool", "operator": "In", "values": []any{"blue", "green"}},
				map[string]any{"key": "gpu", "operator": "DoesNotExist"},
			}}
		}},
	}
	for _, tt := range good {
		t.Run("taken: "+tt.name, func(t *testing.T) {
			spec := goodSpec()
			tt.edit(spec)
			if _, err := create(tt.name, spec); err != nil {
				t.Fatal(err)
			}
		})
	}

	bad := []struct {
		name string
		edit func(spec map[string]any)
		// want are the parts the apiserver's message must contain.
		want []string
	}{
		{"no node selector", func(s map[string]any) { delete(s, "nodeSelector") },
			[]string{"spec.nodeSelector", "Required value"}},
		{"empty node selector", func(s map[string]any) { s["nodeSelector"] = map[string]any{} },
			[]string{"spec.nodeSelector", "nodeSelector must not be empty"}},
		{"node selector of empty lists", func(s map[string]any) {
			s["nodeSelector"] = map[string]any{"matchLabels": map[string]any{}, "matchExpressions": []any{}}
		}, []string{"spec.nodeSelector", "nodeSelector must not be empty"}},
		{"unknown operator", func(s map[string]any) {
			s["nodeSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Is", "values": []any{"blue"}}}}
		}, []string{"spec.nodeSelector", "the operator must be In or NotIn with values"}},
		{"In without values", func(s map[string]any) {
			s["nodeSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In"}}}
		}, []string{"spec.nodeSelector", "the operator must be In or NotIn with values"}},
		{"Exists with values", func(s map[string]any) {
			s["nodeSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Exists", "values": []any{"blue"}}}}
		}, []string{"spec.nodeSelector", "Exists or DoesNotExist without"}},
		{"no configMapRef", func(s map[string]any) { delete(s, "configMapRef") },
			[]string{"spec.configMapRef", "Required value"}},
		{"configMapRef without name", func(s map[string]any) { s["configMapRef"] = map[string]any{"namespace": "kubelet-configs"} },
			[]string{"spec.configMapRef.name", "Required value"}},
		{"configMapRef with a bad name", func(s map[string]any) {
			s["configMapRef"] = map[string]any{"namespace": "kubelet-configs", "name": "Pool_Blue"}
		}, []string{"spec.configMapRef.name", "should match"}},
		{"configMapRef with a bad namespace", func(s map[string]any) {
			s["configMapRef"] = map[string]any{"namespace": "kubelet.configs", "name": "pool-blue-v3"}
		}, []string{"spec.configMapRef.namespace", "should match"}},
		{"canary 0", func(s map[string]any) { s["canary"] = 0 },
			[]string{"spec.canary", "greater than or equal to 1"}},
		{"negative canary", func(s map[string]any) { s["canary"] = -2 },
			[]string{"spec.canary", "greater than or equal to 1"}},
		{"maxUnavailable 0", func(s map[string]any) { s["maxUnavailable"] = 0 },
			[]string{"spec.maxUnavailable", "maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"}},
		{"maxUnavailable 0%", func(s map[string]any) { s["maxUnavailable"] = "0%" },
			[]string{"spec.maxUnavailable", "maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"}},
		{"maxUnavailable 101%", func(s map[string]any) { s["maxUnavailable"] = "101%" },
			[]string{"spec.maxUnavailable", "maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"}},
		{"maxUnavailable a number in a string", func(s map[string]any) { s["maxUnavailable"] = "2" },
			[]string{"spec.maxUnavailable", "maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"}},
		{"maxUnavailable a fraction", func(s map[string]any) { s["maxUnavailable"] = "0.5%" },
			[]string{"spec.maxUnavailable", "maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"}},
		{"unknown onFailure", func(s map[string]any) { s["onFailure"] = "Rollback" },
			[]string{"spec.onFailure", `Unsupported value: "Rollback"`, `"Revert", "Halt"`}},
		{"unknown drain", func(s map[string]any) { s["drain"] = "Sometimes" },
			[]string{"spec.drain", `Unsupported value: "Sometimes"`, `"Auto", "Always", "Never"`}},
		{"drain in lower case", func(s map[string]any) { s["drain"] = "never" },
			[]string{"spec.drain", `Unsupported value: "never"`}},
		{"empty drain", func(s map[string]any) { s["drain"] = "" },
			[]string{"spec.drain", `Unsupported value: ""`}},
	}
	for i, tt := range bad {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			spec := goodSpec()
			tt.edit(spec)
			_, err := create(fmt.Sprintf("bad-%d", i), spec)
			if err == nil {
				t.Fatal("created")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("error %v, want Invalid", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}

	t.Run("kubectl get prints target, selected, updated, failed and the state", func(t *testing.T) {
		table := getTable(t, cfg, "pool-blue")
		var names []string
		for _, c := range table.ColumnDefinitions {
			if c.Priority == 0 {
				names = append(names, c.Name)
			}
		}
		if got, want := strings.Join(names, ","), "Name,Target,Selected,Updated,Failed,State,Age"; got != want {
			t.Errorf("columns %s, want %s", got, want)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("%d rows, want 1", len(table.Rows))
		}
		cells := table.Rows[0].Cells
		want := []any{"pool-blue", "pool-blue-v3", float64(12), float64(5), float64(1), float64(0), v1alpha1.ReasonRollingOut}
		for i, w := range want {
			// Cells follow every column, the wide In-Trial (the fifth) too.
			if cells[i] != w {
				t.Errorf("cell %d (%s) = %v, want %v", i, table.ColumnDefinitions[i].Name, cells[i], w)
			}
		}
	})
}

func goodSpec() map[string]any {
	return map[string]any{
		"nodeSelector": map[string]any{"matchLabels": map[string]any{"nodeguard.dev/pool": "blue"}},
		"configMapRef": map[string]any{"namespace": "kubelet-configs", "name": "pool-blue-v3"},
	}
}

// serveCRD starts a control plane for t, applies the checked-in CRD and
// waits until the apiserver serves it. It returns a client and the admin's
// config.
func serveCRD(t *testing.T) (*dynamic.DynamicClient, *rest.Config) {
	t.Helper()
	cp := controlplane.StartForTest(t, controlplane.Options{})
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, crdDir, "nodeguard.dev_kubeletconfigrollouts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	if err := manifests.Apply(t.Context(), cp.AdminConfig(), []*unstructured.Unstructured{crd}); err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.Resource(crds).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == "Established" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for the CRD to be established: %v", err)
	}
	return client, cp.AdminConfig()
}

// getTable is what kubectl get asks for: the server-side table.
func getTable(t *testing.T, cfg *rest.Config, name string) *metav1.Table {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/apis/%s/%s/%s?fieldSelector=metadata.name%%3D%s", cfg.Host, rollouts.Group, rollouts.Version, rollouts.Resource, name)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	table := &metav1.Table{}
	if err := json.NewDecoder(resp.Body).Decode(table); err != nil {
		t.Fatal(err)
	}
	return table
}
