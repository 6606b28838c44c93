package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventSink writes what client-go's event broadcaster
// (k8s.io/client-go/tools/record) sends, in each Event's own namespace, as
// client-go's typed EventSinkImpl does. Requests end with ctx.
type EventSink struct {
	ctx    context.Context
	client Interface
}

// NewEventSink returns a sink writing through client until ctx ends.
func NewEventSink(ctx context.Context, client Interface) *EventSink {
	return &EventSink{ctx: ctx, client: client}
}

// Create implements record.EventSink.
func (s *EventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	return s.client.Events(event.Namespace).Create(s.ctx, event, metav1.CreateOptions{})
}

// Update implements record.EventSink.
func (s *EventSink) Update(event *corev1.Event) (*corev1.Event, error) {
	return s.client.Events(event.Namespace).Update(s.ctx, event, metav1.UpdateOptions{})
}

// Patch implements record.EventSink: data is a strategic merge patch of
// event, which counts a repeated Event.
func (s *EventSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.client.Events(event.Namespace).Patch(s.ctx, event.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
