package framework

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WebhookMetricSum scrapes the webhook's /metrics and sums the samples of
// the series whose line starts with prefix and contains every one of
// labels (each written as name="value"): how many reviews of a kind the
// webhook has decided, say.
func (e *Env) WebhookMetricSum(prefix string, labels ...string) (float64, error) {
	resp, err := e.ProbeClient.Get(e.WebhookURL + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping the webhook: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("scraping the webhook: %w", err)
	}
	var sum float64
lines:
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		for _, label := range labels {
			if !strings.Contains(line, label) {
				continue lines
			}
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("the webhook's metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
