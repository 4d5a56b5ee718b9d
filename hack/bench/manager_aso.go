package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/manifests"
	"github.com/cerulean/cerulean/internal/pki"
)

// Azure Service Operator v2, unmodified: its controller built from its Go module
// (hack/tools/aso, bin/azure-service-operator), its CRDs and webhook configurations generated
// with controller-gen (hack/aso/crds.sh), reaching the local cloud only through the cloud's
// forward proxy for Azure's public names with the cloud's CA: no endpoint overrides.

const asoBinary = "azure-service-operator"

var (
	gvrCRD       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrMutating  = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	gvrValidting = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// asoState is what install prepares for start and uninstall.
type asoState struct {
	me          *managerEnv
	dir         string // the webhook certificate and the log
	webhookPort int
	caPEM       []byte // the webhook server's CA
	installed   []*unstructured.Unstructured
}

func asoManager(me *managerEnv) *peerManager {
	s := &asoState{me: me, dir: filepath.Join(me.scratch, "aso")}
	return &peerManager{name: "aso", install: s.install, start: s.start, uninstall: s.uninstall}
}

// install generates (or reuses) ASO's CRDs and webhook configurations, points the conversion and
// admission webhooks at a loopback port with a CA of the benchmark's own, labels the CRDs as ASO
// looks for them, and applies everything server-side (the Vault CRD is too large for a
// client-side apply's annotation). Only the CRDs of the workload's groups are installed: ASO
// runs a controller, and holds a cache, for each CRD it finds.
func (s *asoState) install(ctx context.Context, groups map[string]bool) error {
	if _, err := os.Stat(filepath.Join(s.me.binDir, asoBinary)); err != nil {
		return fmt.Errorf("find ASO's controller (make bench-tools builds it): %w", err)
	}
	out, err := exec.CommandContext(ctx, "hack/aso/crds.sh").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("generate ASO CRDs: %w\n%s", err, ee.Stderr)
		}
		return fmt.Errorf("generate ASO CRDs: %w", err)
	}
	gen := strings.TrimSpace(string(out))

	caPEM, err := s.webhookCert()
	if err != nil {
		return err
	}
	s.caPEM = caPEM
	if s.webhookPort, err = freePort(); err != nil {
		return err
	}
	base := "https://127.0.0.1:" + strconv.Itoa(s.webhookPort)
	caBundle := base64.StdEncoding.EncodeToString(caPEM)

	files, err := filepath.Glob(filepath.Join(gen, "crd", "*.yaml"))
	if err != nil {
		return err
	}
	files = append(files, filepath.Join(gen, "webhook", "manifests.yaml"))
	var objs []*unstructured.Unstructured
	for _, f := range files {
		docs, err := manifests.ReadFile(f)
		if err != nil {
			return err
		}
		objs = append(objs, docs...)
	}
	objs = slices.DeleteFunc(objs, func(u *unstructured.Unstructured) bool {
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		return u.GetKind() == "CustomResourceDefinition" && !groups[group]
	})
	for _, u := range objs {
		switch u.GetKind() {
		case "CustomResourceDefinition":
			labels := u.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels["app.kubernetes.io/name"] = "azure-service-operator" // ASO only starts controllers for CRDs so labelled
			u.SetLabels(labels)
			versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
			if len(versions) > 1 {
				if err := unstructured.SetNestedMap(u.Object, map[string]any{
					"strategy": "Webhook",
					"webhook": map[string]any{
						"conversionReviewVersions": []any{"v1"},
						"clientConfig":             map[string]any{"url": base + "/convert", "caBundle": caBundle},
					},
				}, "spec", "conversion"); err != nil {
					return err
				}
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			u.SetName("azure-service-operator-" + u.GetName())
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for i, h := range hooks {
				m := h.(map[string]any)
				path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
				m["clientConfig"] = map[string]any{"url": base + path, "caBundle": caBundle}
				hooks[i] = m
			}
			if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected %s in ASO's generated manifests", u.GetKind())
		}
	}
	for _, u := range objs {
		if err := applyObject(ctx, s.me, u); err != nil {
			return err
		}
		s.installed = append(s.installed, u)
	}
	return waitEstablished(ctx, s.me, objs)
}

// applyObject applies a CRD or webhook configuration server-side, forcing ownership.
func applyObject(ctx context.Context, me *managerEnv, u *unstructured.Unstructured) error {
	gvr := gvrCRD
	switch u.GetKind() {
	case "MutatingWebhookConfiguration":
		gvr = gvrMutating
	case "ValidatingWebhookConfiguration":
		gvr = gvrValidting
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = me.dyn.Resource(gvr).Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "cerulean-bench", Force: &force})
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// start runs ASO's controller as its own process: the bootstrap principal's credentials and the
// proxy settings in the environment, exactly what `cerulean-local cloud env --proxy` prints.
func (s *asoState) start(ctx context.Context, ns string) (*managerProcess, error) {
	if err := ensureNamespace(ctx, s.me, "azureserviceoperator-system"); err != nil {
		return nil, err
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	env := append(proxyEnv(s.me.cloud),
		"KUBECONFIG="+s.me.cp.Kubeconfig,
		"POD_NAMESPACE=azureserviceoperator-system",
		"AZURE_OPERATOR_MODE=watchers-and-webhooks", // "both" (the default) would also manage CRDs
		"AZURE_TARGET_NAMESPACES="+ns,
		"AZURE_SYNC_PERIOD="+mgrSync.String(),
	)
	args := []string{
		"--crd-management=none",
		"--webhook-cert-dir=" + filepath.Join(s.dir, "certs"),
		"--webhook-port=" + strconv.Itoa(s.webhookPort),
		"--health-addr=127.0.0.1:" + strconv.Itoa(health),
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(metrics),
		"--secure-metrics=false",
	}
	p, err := startProcess(filepath.Join(s.me.binDir, asoBinary), args, env, filepath.Join(s.dir, "aso.log"))
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/readyz", health)); err != nil {
		p.stop()
		return nil, err
	}
	// readyz is a ping: wait for the webhook server too, which conversions and admission need.
	if err := waitServingTLS(ctx, p, s.webhookPort, s.caPEM); err != nil {
		p.stop()
		return nil, err
	}
	p.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	return p, nil
}

// proxyEnv is what `cerulean-local cloud env --proxy` prints, unquoted for a process's environment:
// the proxy, the cloud's CA as the only trust, and the bootstrap principal (Owner of the
// subscription). No endpoint, authority host or instance-discovery setting: ASO's public-cloud
// defaults reach login.microsoftonline.com and management.azure.com through the proxy.
func proxyEnv(c *cloud.Cloud) []string {
	st := c.Settings()
	return []string{
		"HTTPS_PROXY=" + st.ProxyURL,
		"NO_PROXY=" + cloud.NoProxy,
		"SSL_CERT_FILE=" + st.CAFile,
		"AZURE_TENANT_ID=" + st.TenantID,
		"AZURE_SUBSCRIPTION_ID=" + st.SubscriptionID,
		"AZURE_CLIENT_ID=" + st.ClientID,
		"AZURE_CLIENT_SECRET=" + st.ClientSecret,
	}
}

// uninstall deletes what install applied and waits until the CRDs are gone, so the next
// manager can install its own under the same names.
func (s *asoState) uninstall(ctx context.Context) error {
	return deleteInstalled(ctx, s.me, s.installed)
}

// webhookCert writes a CA and a serving certificate for 127.0.0.1 into dir/certs (tls.crt,
// tls.key, as controller-runtime's webhook server reads them) and returns the CA.
func (s *asoState) webhookCert() ([]byte, error) {
	certs := filepath.Join(s.dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	ca, err := pki.LoadOrCreateCA(filepath.Join(s.dir, "ca.crt"), filepath.Join(s.dir, "ca.key"), pkix.Name{CommonName: "cerulean bench webhook CA"}, now)
	if err != nil {
		return nil, err
	}
	der, key, err := ca.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := pki.WritePair(filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key"), der, key); err != nil {
		return nil, err
	}
	return ca.PEM(), nil
}

// waitEstablished waits until every CRD among objs is Established.
func waitEstablished(ctx context.Context, me *managerEnv, objs []*unstructured.Unstructured) error {
	deadline := time.Now().Add(time.Minute)
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		for {
			got, err := me.dyn.Resource(gvrCRD).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get CRD %s: %w", u.GetName(), err)
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if established {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not Established after a minute", u.GetName())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// deleteInstalled deletes CRDs and webhook configurations and waits until the CRDs are gone.
func deleteInstalled(ctx context.Context, me *managerEnv, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		gvr := gvrCRD
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			gvr = gvrMutating
		case "ValidatingWebhookConfiguration":
			gvr = gvrValidting
		}
		if err := me.dyn.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		for {
			_, err := me.dyn.Resource(gvrCRD).Get(ctx, u.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s still present after five minutes", u.GetName())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitServingTLS waits until the loopback port completes a TLS handshake with a certificate
// caPEM signed, the process exits or a minute passes.
func waitServingTLS(ctx context.Context, p *managerProcess, port int, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("read webhook CA: no PEM certificate")
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no TLS on port %d after a minute (log %s): %w", port, p.logPath, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.exited:
			return fmt.Errorf("exited before serving on %d (log %s)", port, p.logPath)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
