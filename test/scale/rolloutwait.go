package scale

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
)

// waitRollout watches the rollout until Complete or Failed is True (the
// time the event arrived is the rollout's end), calling tick meanwhile; an
// error from tick ends the wait with it.
func waitRollout(ctx context.Context, rollouts nodeguardclient.KubeletConfigRolloutInterface, timeout time.Duration, tick func() error, progress io.Writer, obs *observer) (time.Time, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(rssSampleEvery)
	defer ticker.Stop()
	lastLog := time.Now()
	for {
		w, err := rollouts.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + rolloutName})
		if err != nil {
			if ctx.Err() != nil {
				return time.Now(), false, fmt.Errorf("the rollout did not end within %s: %w", timeout, ctx.Err())
			}
			pause(ctx)
			continue
		}
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return time.Now(), false, fmt.Errorf("the rollout did not end within %s (updated %d): %w", timeout, obs.snapshot().updated, ctx.Err())
			case <-ticker.C:
				if err := tick(); err != nil {
					w.Stop()
					return time.Now(), false, fmt.Errorf("%w (updated %d)", err, obs.snapshot().updated)
				}
				if time.Since(lastLog) > 10*time.Second {
					lastLog = time.Now()
					logf(progress, "rollout: %d Nodes updated", obs.snapshot().updated)
				}
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				ro, isRollout := ev.Object.(*v1alpha1.KubeletConfigRollout)
				if ev.Type == watch.Error || !isRollout {
					continue
				}
				for _, cond := range ro.Status.Conditions {
					if cond.Status != metav1.ConditionTrue {
						continue
					}
					switch cond.Type {
					case v1alpha1.ConditionComplete:
						w.Stop()
						return time.Now(), true, nil
					case v1alpha1.ConditionFailed:
						w.Stop()
						return time.Now(), false, fmt.Errorf("the rollout failed: %s: %s", cond.Reason, cond.Message)
					}
				}
			}
		}
		w.Stop()
	}
}
