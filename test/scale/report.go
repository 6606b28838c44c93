package scale

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// JSONPrefix starts the machine-readable line WriteReport prints.
const JSONPrefix = "scale-results: "

// WriteReport prints the results as plain tables, then one line of JSON
// after JSONPrefix.
func WriteReport(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tnodes\twindow\toperation\tok\terrors\tp50 ms\tp90 ms\tp99 ms\tmax ms")
	for _, r := range results {
		for _, op := range []string{OpLease, OpStatus, OpNodeWatch, OpConfigGet, OpConfigWait} {
			s, ok := r.Ops[op]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0fs\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\n",
				r.Mode, r.Nodes, r.WindowSeconds, op, s.OK, s.Errors, s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "mode\tnodes\twebhook /authorize/s\twebhook /validate/s\twebhook CPU %\twebhook RSS MiB\tapiserver CPU %\tapiserver RSS MiB\tetcd CPU %\tharness CPU %")
	for _, r := range results {
		authz, validate, cpu, rss := "-", "-", "-", "-"
		if r.WebhookCallsPerSec != nil {
			authz = fmt.Sprintf("%.1f", r.WebhookCallsPerSec["/authorize"])
			validate = fmt.Sprintf("%.1f", r.WebhookCallsPerSec["/validate"])
		}
		if p, ok := r.Processes["webhook"]; ok {
			cpu, rss = fmt.Sprintf("%.1f", p.CPUPercent), fmt.Sprintf("%.0f", p.RSSMiB)
		}
		a, e, h := r.Processes["kube-apiserver"], r.Processes["etcd"], r.Processes["harness"]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.1f\t%.0f\t%.1f\t%.1f\n",
			r.Mode, r.Nodes, authz, validate, cpu, rss, a.CPUPercent, a.RSSMiB, e.CPUPercent, h.CPUPercent)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "mode\tnodes\tapiserver's calls to nodeguard, per second (its own metrics)")
	for _, r := range results {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.APIServerCallsPerSec)) {
			if v := r.APIServerCallsPerSec[k]; v != 0 {
				parts = append(parts, fmt.Sprintf("%s: %.1f", k, v))
			}
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Mode, r.Nodes, strings.Join(parts, ", "))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "mode\tauthorization-config.yaml\tValidatingWebhookConfiguration\tnodeguard.dev's matchConditions")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%q\n", r.Mode, r.Manifests.AuthorizationConfig, r.Manifests.WebhookConfiguration, r.Manifests.AuthorizationMatchConditions)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	for _, r := range results {
		if o := r.Outage; o != nil {
			fmt.Fprintf(w, "\n%s: with the webhook down, an assignment: %s\n", r.Mode, refusal(o.AssignmentRefusal))
			fmt.Fprintf(w, "%s: with the webhook down, an eligible ConfigMap edit: %s\n", r.Mode, refusal(o.EditRefusal))
			fmt.Fprintf(w, "%s: config readers still watching at the window's end: %d of %d\n", r.Mode, o.ReadersWatching, r.ConfigReaders)
			fmt.Fprintf(w, "%s: webhook started again, both writes then went through and the newly assigned node read its configuration: %t %s\n", r.Mode, o.Recovered, o.RecoverError)
			for _, p := range o.Problems() {
				fmt.Fprintf(w, "%s: PROBLEM: %s\n", r.Mode, p)
			}
		}
	}
	for _, r := range results {
		for _, op := range slices.Sorted(maps.Keys(r.Ops)) {
			for _, msg := range r.Ops[op].ErrorSamples {
				fmt.Fprintf(w, "%s: %s error: %s\n", r.Mode, op, msg)
			}
		}
	}
	data, err := json.Marshal(results)
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s%s\n", JSONPrefix, data)
	return err
}

func refusal(msg string) string {
	if msg == "" {
		return "went through"
	}
	return "refused: " + msg
}

// WriteJSON writes the results, indented, to path.
func WriteJSON(path string, results []Result) error {
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
