package policy

import (
	"reflect"
	"runtime"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestConfigDocCache(t *testing.T) {
	c := &configDocCache{}
	port := int32(10255)
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{ReadOnlyPort: port, StaticPodURL: "http://x"}
	p := &projection{children: map[string]*projection{"readOnlyPort": {all: true}}}
	first, _, err := c.doc(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := kubeletConfigDoc(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, want) {
		t.Errorf("cached %v, want %v", first, want)
	}
	again, _, err := c.doc(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(again).Pointer() != reflect.ValueOf(first).Pointer() {
		t.Error("the same configuration was rendered twice under one projection")
	}
	// A reloaded policy set reads other fields: rendered anew.
	other := &projection{children: map[string]*projection{"staticPodURL": {all: true}}}
	doc, _, err := c.doc(cfg, other)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := kubeletConfigDoc(cfg, other); !reflect.DeepEqual(doc, want) {
		t.Errorf("after a projection change: %v, want %v", doc, want)
	}
	// nil renders as null.
	if doc, entry, err := c.doc(nil, p); doc != nil || entry != nil || err != nil {
		t.Errorf("nil configuration: %v, %v", doc, err)
	}
	runtime.KeepAlive(cfg)

	// Entries go with their configuration.
	c = &configDocCache{}
	func() {
		for i := range 10 {
			if _, _, err := c.doc(&kubeletconfigv1beta1.KubeletConfiguration{ReadOnlyPort: int32(i)}, p); err != nil {
				t.Fatal(err)
			}
		}
	}()
	eventually(t, "the cache to drop collected configurations", func() bool {
		runtime.GC()
		n := 0
		c.entries.Range(func(any, any) bool { n++; return true })
		return n == 0
	})
}
