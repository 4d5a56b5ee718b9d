package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// kindTimes is when one kind's objects were first PUT to ARM and became Ready, as times since
// the workload was applied: where a manager's time to Ready goes.
type kindTimes struct {
	firstPut, firstReady, lastReady time.Duration
}

// timeline watches a workload's objects from before they are applied and records when each
// first shows Ready=True.
type timeline struct {
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ready  map[string]map[string]time.Duration // resource -> object name -> Ready at
}

func startTimeline(ctx context.Context, dyn dynamic.Interface, ns string, gvrs []schema.GroupVersionResource) (*timeline, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &timeline{start: time.Now(), cancel: cancel, ready: map[string]map[string]time.Duration{}}
	for _, gvr := range gvrs {
		w, err := dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watch %s: %w", gvr.Resource, err)
		}
		t.ready[gvr.Resource] = map[string]time.Duration{}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					u, isObj := ev.Object.(*unstructured.Unstructured)
					if !isObj || ev.Type == watch.Deleted || !isReady(*u) || u.GetName() == warmUpGroup {
						continue
					}
					t.mu.Lock()
					if _, seen := t.ready[gvr.Resource][u.GetName()]; !seen {
						t.ready[gvr.Resource][u.GetName()] = time.Since(t.start)
					}
					t.mu.Unlock()
				}
			}
		}()
	}
	return t, nil
}

// finish stops the watches and joins what they saw with the cloud's log of ARM PUTs (matched
// to a kind by the path's last resource type, ".../databases/app" to flexibleserversdatabases).
func (t *timeline) finish(log []reqlog.Entry) map[string]kindTimes {
	t.cancel()
	t.wg.Wait()
	out := map[string]kindTimes{}
	for res, objs := range t.ready {
		var kt kindTimes
		if readyAt := slices.Collect(maps.Values(objs)); len(readyAt) > 0 {
			kt.firstReady, kt.lastReady = slices.Min(readyAt), slices.Max(readyAt)
		}
		for _, e := range log {
			if e.Service != "arm" || e.Method != http.MethodPut || e.Time.Before(t.start) || armType(e.Path) == "" || !strings.HasSuffix(res, armType(e.Path)) {
				continue
			}
			at := e.Time.Sub(t.start)
			if kt.firstPut == 0 || at < kt.firstPut {
				kt.firstPut = at
			}
		}
		out[res] = kt
	}
	return out
}

// armType is the last resource type in an ARM resource path, lower-cased ("databases" in
// .../flexibleServers/pg/databases/app), or "" for a path that names no resource.
func armType(path string) string {
	segs := strings.Split(strings.Trim(strings.ToLower(path), "/"), "/")
	if len(segs) < 4 || len(segs)%2 != 0 {
		return ""
	}
	return segs[len(segs)-2]
}

// timelineRows is one row per kind: when its objects were first PUT and all Ready under each
// manager, kinds in the order they were first Ready.
func timelineRows(res map[string]peerResult) []row {
	secs := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	var kinds []string
	var order map[string]kindTimes
	for _, p := range res {
		order = p.timeline
	}
	for k := range order {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return order[kinds[i]].firstReady < order[kinds[j]].firstReady })
	var rows []row
	for _, kind := range kinds {
		r := row{benchmark: fmt.Sprintf("timeline, %s: first ARM PUT → last Ready, seconds after the apply", kind)}
		var parts []string
		for _, name := range []string{"cerulean", "aso"} {
			p, ok := res[name]
			if !ok {
				continue
			}
			kt := p.timeline[kind]
			parts = append(parts, fmt.Sprintf("%s %s → %s", map[string]string{"cerulean": "Cerulean", "aso": "ASO"}[name], secs(kt.firstPut), secs(kt.lastReady)))
		}
		r.result = strings.Join(parts, "; ")
		if c, ok := res["cerulean"]; ok {
			if a, ok := res["aso"]; ok {
				if rt := ratio(c.timeline[kind].lastReady.Seconds(), a.timeline[kind].lastReady.Seconds()); rt != "" {
					r.vsBaseline = rt + " of ASO"
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}
