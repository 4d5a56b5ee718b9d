package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/manifests"
)

func TestPerResourceHourScalesTheWindowToAnHour(t *testing.T) {
	r := peerResult{objects: 601, window: 270 * time.Second}
	if got := r.perResourceHour(1803); got != 40 {
		t.Fatalf("1803 reads of 601 objects in 4m30s = %v per resource per hour, want 40", got)
	}
	if got := (peerResult{objects: 600, warmUp: 1, window: 270 * time.Second}).perResourceHour(1803); got != 40 {
		t.Fatalf("1803 reads of 600 objects and the warm-up group in 4m30s = %v per resource per hour, want 40", got)
	}
	if got := (peerResult{}).perResourceHour(5); got != 0 {
		t.Fatalf("no objects: got %v, want 0", got)
	}
}

func TestManagerRowsGiveRatiosOfASOOnlyWhereASOCounted(t *testing.T) {
	res := map[string]peerResult{
		"cerulean": {pairs: 1, objects: 3, ready: 3, readyIn: 20 * time.Second, window: time.Hour, reads: 6, peakRSS: 50 << 20, peakAnon: 20 << 20},
		"aso":      {pairs: 1, objects: 3, ready: 3, readyIn: 10 * time.Second, window: time.Hour, reads: 3, writes: 3, peakRSS: 100 << 20, peakAnon: 40 << 20},
	}
	rows := managerRows(res)
	want := map[string]string{
		"time to Ready":                  "2.00× of ASO",
		"ARM writes":                     "0.00× of ASO",
		"ARM reads":                      "2.00× of ASO",
		"token requests":                 "", // zero for both: no ratio, not " of ASO"
		"manager memory, peak RSS":       "0.50× of ASO",
		"manager memory, peak anonymous": "0.50× of ASO",
	}
	for prefix, vs := range want {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r.benchmark, prefix) {
				found = true
				if r.vsBaseline != vs {
					t.Errorf("%s: vs baseline %q, want %q", prefix, r.vsBaseline, vs)
				}
			}
		}
		if !found {
			t.Errorf("no row %q in %+v", prefix, rows)
		}
	}
	for _, r := range rows {
		if strings.HasPrefix(r.benchmark, "objects Ready within the cap") {
			t.Errorf("a cap row although every object was Ready: %+v", r)
		}
	}
}

func TestManagerRowsNameTheCapWhenReached(t *testing.T) {
	rows := managerRows(map[string]peerResult{
		"cerulean": {pairs: 2, objects: 5, ready: 3},
		"aso":      {pairs: 2, objects: 5, ready: 5},
	})
	for _, r := range rows {
		if strings.HasPrefix(r.benchmark, "objects Ready within the cap") {
			if r.result != "Cerulean 3/5; ASO 5/5" {
				t.Fatalf("cap row %q", r.result)
			}
			return
		}
	}
	t.Fatalf("no cap row in %+v", rows)
}

// createAll and releaseObjects address each object by gvrOf: the plural of every kind the
// manager benches create must be its CRD's.
func TestGVROfIsTheCRDsPlural(t *testing.T) {
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	plurals := map[string]string{}
	for _, f := range files {
		docs, err := manifests.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			kind, _, _ := unstructured.NestedString(d.Object, "spec", "names", "kind")
			plural, _, _ := unstructured.NestedString(d.Object, "spec", "names", "plural")
			group, _, _ := unstructured.NestedString(d.Object, "spec", "group")
			plurals[group+"/"+kind] = plural
		}
	}
	objs := groupedWorkload("ns", "rg", 2, 2, "https://issuer")
	objs = append(objs, serviceWorkload(nil, "bench-test", "rg").objs...)
	for _, u := range objs {
		gvr := gvrOf(u)
		if want := plurals[gvr.Group+"/"+u.GetKind()]; gvr.Resource != want {
			t.Errorf("gvrOf(%s) = %q, the CRD's plural is %q", u.GetKind(), gvr.Resource, want)
		}
	}
}

// A manager stopped at the cap has no time to Ready, no work per object and no steady state:
// those rows show how far it got and make no ratio with it; its memory still compares. The
// values are those of a run in which ASO had 5,523 of 10,050 objects Ready at a 30-minute cap.
func TestScaleRowsMakeNoRatioWithAManagerStoppedAtTheCap(t *testing.T) {
	rows := scaleRows(map[string]peerResult{
		"cerulean": {pairs: 5000, objects: 10050, ready: 10050, warmUp: 1, readyIn: 723 * time.Second, window: 90 * time.Second,
			reads: 10050, peakRSS: 229777408, peakAnon: 165302272, cpu: 308 * time.Second, reconciles: 57910, apiRequests: 65234},
		"aso": {pairs: 5000, objects: 10050, ready: 5523, warmUp: 1, readyIn: 1905 * time.Second, window: 90 * time.Second,
			reads: 1134, writes: 1529, peakRSS: 252465152, peakAnon: 145932288, cpu: 601 * time.Second, reconciles: 38749, apiRequests: 108319},
	})
	const stopped = "ASO not all Ready at the cap"
	want := map[string]struct{ result, vs string }{
		"time to Ready":                  {"Cerulean 12m3s; " + stopped, ""},
		"objects Ready within the cap":   {"Cerulean 10050/10050; ASO 5523/10050", ""},
		"manager memory, peak RSS":       {"Cerulean 219 MiB; ASO 241 MiB", "0.91× of ASO"},
		"manager CPU time":               {"Cerulean 5m8s; " + stopped, ""},
		"CPU time per object":            {"Cerulean 30.6 ms; " + stopped, ""},
		"ARM writes":                     {"Cerulean 0.0; " + stopped, ""},
		"ARM reads (GET)":                {"Cerulean 40.0; " + stopped, ""},
		"API server requests per object": {"Cerulean 6.5; " + stopped, ""},
	}
	for prefix, w := range want {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r.benchmark, prefix) {
				found = true
				if r.result != w.result || r.vsBaseline != w.vs {
					t.Errorf("%s: %q, %q; want %q, %q", prefix, r.result, r.vsBaseline, w.result, w.vs)
				}
			}
		}
		if !found {
			t.Errorf("no row %q", prefix)
		}
	}
}
