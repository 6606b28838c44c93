package scale

import (
	"context"
	"errors"
)

const (
	apiserverAdmitTime = "apiserver_admission_webhook_admission_duration_seconds"
	webhookTime        = "nodeguard_http_request_duration_seconds"
)

// admissionTime is what validating webhooks cost the writes of a rollout:
// the apiserver's own account of its calls to them (each call, as it timed
// it) and the nodeguard webhook's of its /validate reviews. Both are sums
// and counts of histograms, taken before and after, so that their means
// cover the rollout alone.
type admissionTime struct {
	apiserverSum, apiserverCount float64
	webhookSum, webhookCount     float64
}

// AdmissionStats are the mean times of the validating webhook calls made
// during a rollout, as the apiserver and as the webhook timed them.
type AdmissionStats struct {
	Calls           int     `json:"calls"`
	ApiserverMeanMs float64 `json:"apiserver_mean_ms"`
	WebhookReviews  int     `json:"webhook_reviews"`
	WebhookMeanMs   float64 `json:"webhook_mean_ms"`
}

func takeAdmissionTime(ctx context.Context, c *cluster) (admissionTime, error) {
	var t admissionTime
	apiserver, aerr := scrape(ctx, c.adminHTTP, c.cp.URL()+"/metrics", apiserverAdmitTime+"_sum", apiserverAdmitTime+"_count")
	validating := func(l map[string]string) bool { return l["type"] == "validating" }
	t.apiserverSum = sumBy(apiserver, apiserverAdmitTime+"_sum", "", validating)[""]
	t.apiserverCount = sumBy(apiserver, apiserverAdmitTime+"_count", "", validating)[""]
	webhook, werr := scrape(ctx, c.env.ProbeClient, c.env.WebhookURL+"/metrics", webhookTime+"_sum", webhookTime+"_count")
	validate := func(l map[string]string) bool { return l["endpoint"] == "/validate" }
	t.webhookSum = sumBy(webhook, webhookTime+"_sum", "", validate)[""]
	t.webhookCount = sumBy(webhook, webhookTime+"_count", "", validate)[""]
	return t, errors.Join(aerr, werr)
}

// admissionStats are the means between two takes.
func admissionStats(before, after admissionTime) AdmissionStats {
	var s AdmissionStats
	if n := after.apiserverCount - before.apiserverCount; n > 0 {
		s.Calls = int(n)
		s.ApiserverMeanMs = 1000 * (after.apiserverSum - before.apiserverSum) / n
	}
	if n := after.webhookCount - before.webhookCount; n > 0 {
		s.WebhookReviews = int(n)
		s.WebhookMeanMs = 1000 * (after.webhookSum - before.webhookSum) / n
	}
	return s
}
