package scale

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watchOwnNode keeps a watch on the node's own Node, named through the
// field selector as the kubelet's informer does, and restarts it when it
// ends. A failed start or an error event counts as a node-watch error; a
// start counts as one node-watch operation (its latency is the time to the
// watch's response headers).
func (k *kubelet) watchOwnNode(ctx context.Context) {
	rv := k.nodeRV
	for ctx.Err() == nil {
		start := time.Now()
		w, err := k.core.Nodes().Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + k.name, ResourceVersion: rv, AllowWatchBookmarks: true,
		})
		k.observe(ctx, OpNodeWatch, start, err)
		if err != nil {
			pause(ctx)
			continue
		}
		rv = k.drain(ctx, w, OpNodeWatch, rv)
	}
}

// readConfig reads the assigned ConfigMap by name with the node's
// credentials, then watches it by name, as the agent does, getting it
// again whenever the watch cannot resume.
func (k *kubelet) readConfig(ctx context.Context) {
	ref := *k.config
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			start := time.Now()
			cm, err := k.core.ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			k.observe(ctx, OpConfigGet, start, err)
			if err != nil {
				pause(ctx)
				continue
			}
			rv = cm.ResourceVersion
		}
		start := time.Now()
		w, err := k.core.ConfigMaps(ref.Namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + ref.Name, ResourceVersion: rv, AllowWatchBookmarks: true,
		})
		k.observe(ctx, OpConfigWait, start, err)
		if err != nil {
			rv = ""
			pause(ctx)
			continue
		}
		k.watchingConfig.Store(true)
		rv = k.drain(ctx, w, OpConfigWait, rv)
	}
}

// drain reads a watch until it ends and returns the resourceVersion to
// resume from ("" when the watch said it is too old to resume).
func (k *kubelet) drain(ctx context.Context, w watch.Interface, op string, rv string) string {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				k.observe(ctx, op, time.Now(), fmt.Errorf("watch error event: %w", err))
				var status apierrors.APIStatus
				if errors.As(err, &status) && status.Status().Code == 410 {
					return ""
				}
				return rv
			}
			if m, err := metaAccessor(ev.Object); err == nil && m != "" {
				rv = m
			}
		}
	}
}

func metaAccessor(obj any) (string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return "", errors.New("not an object")
	}
	return o.GetResourceVersion(), nil
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(retryPause):
	}
}
