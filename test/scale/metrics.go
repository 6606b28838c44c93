package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads url's Prometheus text exposition and returns the samples of
// the metrics named. A parser of its own, for the few counters read here,
// keeps the product's go.mod free of a direct dependency the product does
// not have.
func scrape(ctx context.Context, client *http.Client, url string, names ...string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []sample
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		if !want[name] {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("scraping %s: %w", url, err)
		}
		out = append(out, s)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return out, nil
}

// parseSample parses `name{a="x",b="y"} value [timestamp]`.
func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		s.name = line[:i]
		rest = line[i+1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("malformed labels in %q", line)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var value strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						value.WriteByte('\n')
					default:
						value.WriteByte(rest[i])
					}
					continue
				}
				if c == '"' {
					rest, closed = rest[i+1:], true
					break
				}
				value.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value in %q", line)
			}
			s.labels[key] = value.String()
		}
	} else {
		sp := strings.IndexByte(line, ' ')
		if sp < 0 {
			return s, fmt.Errorf("no value in %q", line)
		}
		s.name, rest = line[:sp], line[sp:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %q: %w", line, err)
	}
	s.value = v
	return s, nil
}

// sumBy adds up the samples of name by the value of label.
func sumBy(samples []sample, name, label string, keep func(map[string]string) bool) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.name != name || (keep != nil && !keep(s.labels)) {
			continue
		}
		out[s.labels[label]] += s.value
	}
	return out
}

// rates is (after-before)/seconds per key.
func rates(before, after map[string]float64, seconds float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = (v - before[k]) / seconds
	}
	return out
}
