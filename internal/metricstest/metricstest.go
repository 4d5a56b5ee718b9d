// Package metricstest reads a component's Prometheus endpoint in tests, so that they assert the
// values users' dashboards see, not just the names.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scrape reads base + "/metrics" over HTTP, as Prometheus does.
func Scrape(base string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Sum adds the samples of the series name whose labels include every one of labels (each
// written `key="value"`), in Prometheus's text format: `name{a="x",b="y"} value`, or
// `name value` for a series without labels.
func Sum(body, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		var set, value string
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			if set, value, ok = strings.Cut(rest, "} "); !ok {
				continue
			}
		} else if value, ok = strings.CutPrefix(line, name+" "); !ok {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(","+set+",", ","+l+",")
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); all && err == nil {
			sum += v
		}
	}
	return sum
}
