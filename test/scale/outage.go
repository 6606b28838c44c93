package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// recoverDeadline bounds waiting for the webhook to answer again after it
// is restarted (start-up, informers' sync, the apiserver's reconnect).
const recoverDeadline = 2 * time.Minute

// Outage is what the webhook-down mode checks beyond the kubelets' own
// traffic: the writes nodeguard must judge are refused while no replica
// answers, with a message that names it, and nothing is lost when it is
// back.
type Outage struct {
	// AssignmentRefusal and EditRefusal are the apiserver's answers to an
	// assignment and to an edit of the eligible ConfigMap made while the
	// webhook was down; empty when the write went through.
	AssignmentRefusal string `json:"assignment_refusal"`
	EditRefusal       string `json:"edit_refusal"`
	// ReadersWatching is how many of the config readers still had their
	// named watch open at the end of the window.
	ReadersWatching int `json:"readers_watching"`
	// Recovered says that, once the webhook was started again, the refused
	// assignment and edit went through and the newly assigned node read
	// its configuration; RecoverError says why not.
	Recovered    bool   `json:"recovered"`
	RecoverError string `json:"recover_error,omitempty"`
}

// Problems lists what the outage got wrong, for tests and the report.
func (o *Outage) Problems() []string {
	var p []string
	for what, msg := range map[string]string{"assignment": o.AssignmentRefusal, "eligible ConfigMap edit": o.EditRefusal} {
		switch {
		case msg == "":
			p = append(p, what+" went through with the webhook down")
		case !strings.Contains(msg, "nodeguard"):
			p = append(p, fmt.Sprintf("%s refused without naming nodeguard: %s", what, msg))
		}
	}
	if !o.Recovered {
		p = append(p, "not recovered after the webhook came back: "+o.RecoverError)
	}
	return p
}

// checkOutage runs after the webhook-down window, the webhook still down.
// It tries the writes nodeguard judges, starts the webhook again and
// checks that they then succeed.
func checkOutage(ctx context.Context, c *cluster, f *fleet) *Outage {
	o := &Outage{}
	for _, k := range f.kubelets {
		if k.config != nil && k.watchingConfig.Load() {
			o.ReadersWatching++
		}
	}
	newcomer := f.unassigned()
	assign := func(ctx context.Context) error {
		if newcomer == nil {
			return errors.New("every node is already assigned: use a config fraction below 1")
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, assignAnnotation, configNamespace+"/"+configName)
		_, err := c.admin.CoreV1().Nodes().Patch(ctx, newcomer.name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	edit := func(ctx context.Context) error {
		patch := fmt.Appendf(nil, `{"data":{%q:%q}}`, configKey, kubeletConfig+"# edited "+time.Now().UTC().Format(time.RFC3339Nano)+"\n")
		_, err := c.admin.CoreV1().ConfigMaps(configNamespace).Patch(ctx, configName, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	o.AssignmentRefusal = errorText(assign(ctx))
	o.EditRefusal = errorText(edit(ctx))

	if err := c.env.StartWebhook(ctx); err != nil {
		o.RecoverError = fmt.Sprintf("restarting the webhook: %v", err)
		return o
	}
	deadline := time.Now().Add(recoverDeadline)
	for _, step := range []struct {
		what string
		do   func(context.Context) error
	}{{"assignment", assign}, {"edit", edit}} {
		if err := retryUntil(ctx, deadline, step.what+" to go through", step.do); err != nil {
			o.RecoverError = fmt.Sprintf("%s after the restart: %v", step.what, err)
			return o
		}
	}
	newcomer.config = &types.NamespacedName{Namespace: configNamespace, Name: configName}
	f.readers++
	f.goRun(func() { newcomer.readConfig(f.runCtx) })
	if err := retryUntil(ctx, deadline, newcomer.name+" to read its configuration", func(context.Context) error {
		if !newcomer.watchingConfig.Load() {
			return fmt.Errorf("%s does not read its new configuration yet", newcomer.name)
		}
		return nil
	}); err != nil {
		o.RecoverError = err.Error()
		return o
	}
	o.Recovered = true
	return o
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// retryUntil calls f until it succeeds or the deadline passes.
func retryUntil(ctx context.Context, deadline time.Time, what string, f func(context.Context) error) error {
	return framework.Eventually(ctx, time.Until(deadline), what, func(ctx context.Context) (bool, string, error) {
		err := f(ctx)
		return err == nil, fmt.Sprint(err), nil
	})
}
