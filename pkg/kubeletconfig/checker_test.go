package kubeletconfig

import (
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

func TestChecker(t *testing.T) {
	good := []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n")
	invalid := []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -1\n")
	undecodable := []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 110\n")

	for _, tc := range []struct {
		name        string
		data        []byte
		wantErr     bool
		wantInvalid bool
	}{
		{"valid", good, false, false},
		{"invalid", invalid, false, true},
		{"does not decode", undecodable, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(4)
			first := c.Check(string(tc.data))
			if (first.Err != nil) != tc.wantErr || (len(first.Invalid) > 0) != tc.wantInvalid {
				t.Fatalf("Check = err %v, invalid %v; want err %v, invalid %v", first.Err, first.Invalid, tc.wantErr, tc.wantInvalid)
			}
			if tc.wantErr != (first.Config == nil) {
				t.Fatalf("Config = %v with err %v", first.Config, first.Err)
			}
			// The same content, in another buffer, is the same outcome.
			if again := c.Check(string(append([]byte(nil), tc.data...))); again != first {
				t.Fatal("a repeat of the same content was decoded again")
			}
			cfg, err := Decode(tc.data)
			if (err != nil) != tc.wantErr || !reflect.DeepEqual(cfg, first.Config) {
				t.Fatalf("Check's config differs from Decode's: %v, %v", first.Config, cfg)
			}
		})
	}
}

func TestCheckerEvictsOldest(t *testing.T) {
	c := NewChecker(2)
	doc := func(pods int) string {
		return fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: %d\n", pods)
	}
	first := c.Check(doc(1))
	c.Check(doc(2))
	c.Check(doc(3))
	if c.Check(doc(1)) == first {
		t.Fatal("the oldest outcome was kept beyond the size")
	}
}

// TestCheckedIsNotModified guards the sharing: what callers do with a
// shared outcome (validate, check gates, diff) leaves it as decoded.
func TestCheckedIsNotModified(t *testing.T) {
	data, err := os.ReadFile("testdata/kubelet-4k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := NewChecker(1)
	checked := c.Check(string(data))
	if checked.Err != nil {
		t.Fatal(checked.Err)
	}
	pristine := checked.Config.DeepCopy()
	Validate(checked.Config)
	CheckFeatureGates(checked.Config, version.MustParseGeneric("1.30.0"))
	Diff(nil, checked.Config)
	Diff(checked.Config, pristine)
	if !reflect.DeepEqual(checked.Config, pristine) {
		t.Fatal("a shared configuration was modified")
	}
}

func TestCheckConfigMapKey(t *testing.T) {
	c := NewChecker(4)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool"},
		Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"}}
	if checked, err := c.CheckConfigMapKey(cm, "kubelet"); err != nil || checked.Err != nil {
		t.Fatalf("CheckConfigMapKey = %v, %v", checked, err)
	}
	if _, err := c.CheckConfigMapKey(cm, "other"); err == nil {
		t.Fatal("a missing key was not an error")
	}
	if _, err := c.CheckConfigMapKey(nil, "kubelet"); err == nil {
		t.Fatal("no ConfigMap was not an error")
	}
}

func TestCheckerConcurrent(t *testing.T) {
	c := NewChecker(8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				data := fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: %d\n", 1+(i+j)%12)
				if checked := c.Check(data); checked.Err != nil || len(checked.Invalid) > 0 {
					t.Errorf("Check = %v, %v", checked.Err, checked.Invalid)
					return
				}
			}
		})
	}
	wg.Wait()
}
