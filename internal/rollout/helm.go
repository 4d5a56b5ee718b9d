package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasecommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/yaml"
)

// DigestLabel is the Helm release label holding the digest of the chart and values a rollout
// deployed: a re-run with the same digest and a deployed release changes nothing.
const DigestLabel = "rollout.cerulean.io/digest"

// chartSpec is the loaded chart and the values every cluster shares.
type chartSpec struct {
	chart   *chartv2.Chart
	release string
	values  map[string]any // without the client id
	valPath []string
}

func loadChart(app App) (*chartSpec, error) {
	ch, err := loader.Load(app.Chart)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", app.Chart, err)
	}
	vals := map[string]any{}
	for _, f := range app.ValuesFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read values file: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("read values file %s: %w", f, err)
		}
		mergeValues(vals, m)
	}
	mergeValues(vals, app.Values)
	name := app.Release
	if name == "" {
		name = ch.Name()
	}
	return &chartSpec{chart: ch, release: name, values: vals, valPath: strings.Split(app.ClientIDValue, ".")}, nil
}

// mergeValues merges src into dst, maps recursively, as Helm merges -f files.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
			cp := map[string]any{}
			mergeValues(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// valuesFor are the chart's values on one cluster: the shared values with the client id set.
func (s *chartSpec) valuesFor(clientID string) map[string]any {
	out := map[string]any{}
	mergeValues(out, s.values)
	m := out
	for _, k := range s.valPath[:len(s.valPath)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[s.valPath[len(s.valPath)-1]] = clientID
	return out
}

// digest identifies the chart's content (every file, dependencies included; not their
// modification times, which a fresh checkout changes) and the values.
func (s *chartSpec) digest(vals map[string]any) (string, error) {
	h := sha256.New()
	write := func(parts ...[]byte) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:", len(p)) // length-prefixed: no two inputs hash alike
			h.Write(p)
		}
	}
	files := func(kind string, fs []*common.File) {
		sorted := slices.Clone(fs)
		slices.SortFunc(sorted, func(a, b *common.File) int { return strings.Compare(a.Name, b.Name) })
		for _, f := range sorted {
			write([]byte(kind), []byte(f.Name), f.Data)
		}
	}
	var add func(c *chartv2.Chart) error
	add = func(c *chartv2.Chart) error {
		meta, err := json.Marshal(c.Metadata)
		if err != nil {
			return err
		}
		lock, err := json.Marshal(c.Lock)
		if err != nil {
			return err
		}
		values, err := json.Marshal(c.Values) // map keys are sorted
		if err != nil {
			return err
		}
		write([]byte("chart"), meta, lock, values, c.Schema)
		files("template", c.Templates)
		files("file", c.Files)
		deps := slices.Clone(c.Dependencies())
		slices.SortFunc(deps, func(a, b *chartv2.Chart) int { return strings.Compare(a.Name(), b.Name()) })
		for _, d := range deps {
			if err := add(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(s.chart); err != nil {
		return "", fmt.Errorf("digest chart: %w", err)
	}
	b, err := json.Marshal(vals)
	if err != nil {
		return "", fmt.Errorf("digest values: %w", err)
	}
	write([]byte("values"), b)
	return hex.EncodeToString(h.Sum(nil))[:40], nil
}

// deployOptions are one cluster's deploy.
type deployOptions struct {
	cluster   Cluster
	namespace string
	clientID  string
	timeout   time.Duration
}

// deploy installs the release, or upgrades it when its chart or values differ; it changes
// nothing when the deployed release carries the same digest.
func (s *chartSpec) deploy(ctx context.Context, o deployOptions) (changed bool, detail string, err error) {
	getter, err := newRESTGetter(o.cluster, o.namespace)
	if err != nil {
		return false, "", err
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	if err := cfg.Init(getter, o.namespace, "secret"); err != nil {
		return false, "", fmt.Errorf("init helm: %w", err)
	}
	vals := s.valuesFor(o.clientID)
	sum, err := s.digest(vals)
	if err != nil {
		return false, "", err
	}
	labels := map[string]string{DigestLabel: sum}

	cur, err := action.NewGet(cfg).Run(s.release)
	var last *releasev1.Release
	switch {
	case err == nil:
		r, ok := cur.(*releasev1.Release)
		if !ok {
			return false, "", fmt.Errorf("read release %s: unexpected release type %T", s.release, cur)
		}
		last = r
	case errors.Is(err, driver.ErrReleaseNotFound):
	default:
		return false, "", fmt.Errorf("read release %s: %w", s.release, err)
	}
	if last != nil && last.Info != nil && last.Info.Status == releasecommon.StatusDeployed && last.Labels[DigestLabel] == sum {
		return false, fmt.Sprintf("release %s revision %d current", s.release, last.Version), nil
	}
	if last == nil || (last.Version == 1 && last.Info != nil && last.Info.Status == releasecommon.StatusFailed) {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = s.release, o.namespace, true
		in.Replace = last != nil
		in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, o.timeout
		in.Labels = labels
		if _, err := in.RunWithContext(ctx, s.chart, vals); err != nil {
			return false, "", fmt.Errorf("install release %s: %w", s.release, err)
		}
		return true, fmt.Sprintf("installed release %s", s.release), nil
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = o.namespace
	up.WaitStrategy, up.Timeout = kube.HookOnlyStrategy, o.timeout
	up.Labels = maps.Clone(labels)
	rel, err := up.RunWithContext(ctx, s.release, s.chart, vals)
	if err != nil {
		return false, "", fmt.Errorf("upgrade release %s: %w", s.release, err)
	}
	version := 0
	if r, ok := rel.(*releasev1.Release); ok {
		version = r.Version
	}
	return true, fmt.Sprintf("upgraded release %s to revision %d", s.release, version), nil
}
