package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cerulean/cerulean/internal/azure"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// Options say what to diagnose and where.
type Options struct {
	Namespace string
	// Target is pod/NAME or sa/NAME (also pods/, serviceaccount/, serviceaccounts/).
	Target string
	// Scope, when set, is a resource id whose role assignments for the identity are listed.
	Scope string
	// Kube reaches the cluster.
	Kube *rest.Config
	// Azure reaches the cloud; ARM reads need Reader on the identity and the scope.
	Azure azure.Config
	// ExpectedIssuer, when set (CERULEAN_OIDC_ISSUER), is the issuer the identity's federated
	// credentials were written for; a cluster that reports another one fails the issuer step.
	ExpectedIssuer string
}

// ErrUsage reports arguments the doctor cannot work with.
var ErrUsage = errors.New("usage")

// OptionsFromEnv reads KUBECONFIG (with kubectl's defaults), the AZURE_* variables and
// SSL_CERT_FILE that `cerulean-local cloud env` prints, and CERULEAN_OIDC_ISSUER.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k := getenv("KUBECONFIG"); k != "" {
		rules.ExplicitPath = ""
		rules.Precedence = strings.Split(k, ":")
	}
	kube, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return Options{}, fmt.Errorf("load kubeconfig: %w", err)
	}
	return Options{Kube: kube, Azure: azure.ConfigFromEnv(getenv), ExpectedIssuer: getenv("CERULEAN_OIDC_ISSUER")}, nil
}

func parseTarget(t string) (kind, name string, err error) {
	k, n, ok := strings.Cut(t, "/")
	if !ok || n == "" || strings.Contains(n, "/") {
		return "", "", fmt.Errorf("%w: want pod/NAME or sa/NAME, got %q", ErrUsage, t)
	}
	switch strings.ToLower(k) {
	case "pod", "pods", "po":
		return "pod", n, nil
	case "sa", "serviceaccount", "serviceaccounts":
		return "sa", n, nil
	}
	return "", "", fmt.Errorf("%w: want pod/NAME or sa/NAME, got %q", ErrUsage, t)
}

// checker carries what the steps learn for the steps after them.
type checker struct {
	opts   Options
	kube   kubernetes.Interface
	report Report

	ns, saName string
	pod        *corev1.Pod
	sa         *corev1.ServiceAccount
	clientID   string
	tenantID   string
	audience   string
	expiration int64
	issuer     string
	identity   *armmsi.Identity
	cred       azcore.TokenCredential
	azOpts     azcore.ClientOptions
}

func (c *checker) add(s Step) { c.report.Steps = append(c.report.Steps, s) }

// WorkloadIdentity runs every step. An error means the arguments or the configuration are
// unusable (exit code 2); everything found in the cluster or the cloud is in the Report.
func WorkloadIdentity(ctx context.Context, opts Options) (Report, error) {
	kind, name, err := parseTarget(opts.Target)
	if err != nil {
		return Report{}, err
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Kube == nil {
		return Report{}, fmt.Errorf("%w: no cluster configuration", ErrUsage)
	}
	kube, err := kubernetes.NewForConfig(opts.Kube)
	if err != nil {
		return Report{}, fmt.Errorf("create cluster client: %w", err)
	}
	c := &checker{opts: opts, kube: kube, ns: opts.Namespace, audience: wi.DefaultAudience, expiration: wi.DefaultTokenExpiration}
	if kind == "pod" {
		c.report.Subject = "pod " + c.ns + "/" + name
		p, err := kube.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			c.add(Step{Name: StepLabel, Status: Error, Detail: fmt.Sprintf("cannot read pod %s/%s: %v", c.ns, name, err)})
			return c.report, nil
		}
		c.pod = p
		c.saName = p.Spec.ServiceAccountName
		if c.saName == "" {
			c.saName = "default"
		}
		c.report.Subject += " (service account " + c.saName + ")"
	} else {
		c.saName = name
		c.report.Subject = "service account " + c.ns + "/" + name
	}
	c.label()
	c.serviceAccount(ctx)
	c.mutation(ctx)
	c.clusterIssuer(ctx)
	c.azureIdentity(ctx)
	c.federatedCredential(ctx)
	c.tokenExchange(ctx)
	c.roleAssignments(ctx)
	return c.report, nil
}

func (c *checker) subject() string { return "system:serviceaccount:" + c.ns + ":" + c.saName }

func (c *checker) label() {
	if c.pod == nil {
		c.add(Step{Name: StepLabel, Status: Skip, Detail: "no pod given: a pod of this service account needs the label " + wi.UseLabel + "=true"})
		return
	}
	if v := c.pod.Labels[wi.UseLabel]; v != "true" {
		detail := "the pod has no label " + wi.UseLabel
		if v != "" {
			detail = fmt.Sprintf("the pod's label %s is %q, not \"true\"", wi.UseLabel, v)
		}
		c.add(Step{Name: StepLabel, Status: Fail, Detail: detail + ", so the webhook never sees it",
			Fix: fmt.Sprintf("add the label %s: \"true\" to the pod's template (labels count at creation: recreate the pod)", wi.UseLabel)})
		return
	}
	c.add(Step{Name: StepLabel, Status: Pass, Detail: wi.UseLabel + "=true"})
}

func (c *checker) serviceAccount(ctx context.Context) {
	sa, err := c.kube.CoreV1().ServiceAccounts(c.ns).Get(ctx, c.saName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.add(Step{Name: StepServiceAccount, Status: Fail, Detail: fmt.Sprintf("service account %s/%s does not exist", c.ns, c.saName),
			Fix: fmt.Sprintf("kubectl create serviceaccount -n %s %s, annotated with %s", c.ns, c.saName, wi.ClientIDAnnotation)})
		return
	}
	if err != nil {
		c.add(Step{Name: StepServiceAccount, Status: Error, Detail: fmt.Sprintf("cannot read service account %s/%s: %v", c.ns, c.saName, err)})
		return
	}
	c.sa = sa
	c.tenantID = c.opts.Azure.TenantID
	settings, err := wi.ParseSettings(nil, sa.Annotations)
	if err != nil {
		c.add(Step{Name: StepServiceAccount, Status: Fail, Detail: err.Error(),
			Fix: fmt.Sprintf("set %s to whole seconds from %d to %d, or remove it", wi.TokenExpirationAnnotation, wi.MinTokenExpiration, wi.MaxTokenExpiration)})
		return
	}
	c.expiration = settings.TokenExpiration
	if settings.TenantID != "" {
		c.tenantID = settings.TenantID
	}
	c.clientID = settings.ClientID
	if c.clientID == "" {
		c.add(Step{Name: StepServiceAccount, Status: Fail,
			Detail: fmt.Sprintf("service account %s/%s has no %s annotation: pods get no AZURE_CLIENT_ID", c.ns, c.saName, wi.ClientIDAnnotation),
			Fix:    fmt.Sprintf("kubectl annotate serviceaccount -n %s %s %s=<the managed identity's client id>", c.ns, c.saName, wi.ClientIDAnnotation)})
		return
	}
	c.add(Step{Name: StepServiceAccount, Status: Pass, Detail: fmt.Sprintf("%s/%s: client id %s, tenant %s", c.ns, c.saName, c.clientID, orDefault(c.tenantID, "(the webhook's)"))})
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (c *checker) mutation(ctx context.Context) {
	registered, err := c.webhookRegistered(ctx)
	if c.pod == nil {
		switch {
		case err != nil:
			c.add(Step{Name: StepMutation, Status: Error, Detail: "cannot list mutating webhook configurations: " + err.Error()})
		case !registered:
			c.add(Step{Name: StepMutation, Status: Fail, Detail: "no mutating webhook serves " + wi.Path + ": new pods will not be mutated",
				Fix: "run `cerulean manager` (or install the chart); under `cerulean-local up` it registers itself"})
		default:
			c.add(Step{Name: StepMutation, Status: Pass, Detail: "a workload identity webhook is registered for new pods"})
		}
		return
	}
	vol := tokenProjection(c.pod)
	var unmutated []string
	var clientIDs []string
	for _, ct := range append(slices.Clone(c.pod.Spec.InitContainers), c.pod.Spec.Containers...) {
		env := map[string]string{}
		for _, e := range ct.Env {
			env[e.Name] = e.Value
		}
		if _, ok := env[wi.TokenFileEnv]; !ok {
			unmutated = append(unmutated, ct.Name)
			continue
		}
		if id, ok := env[wi.ClientIDEnv]; ok {
			clientIDs = append(clientIDs, id)
		}
	}
	if vol == nil || len(unmutated) == len(c.pod.Spec.InitContainers)+len(c.pod.Spec.Containers) {
		fix := "recreate the pod now that the label and the webhook are in place"
		if err == nil && !registered {
			fix = "no mutating webhook serves " + wi.Path + ": run `cerulean manager` (or install the chart), then recreate the pod"
		}
		c.add(Step{Name: StepMutation, Status: Fail, Detail: "the pod has no projected token volume " + wi.TokenVolume + " or no AZURE_FEDERATED_TOKEN_FILE: it was not mutated at creation", Fix: fix})
		return
	}
	c.audience = vol.Audience
	if vol.ExpirationSeconds != nil {
		c.expiration = *vol.ExpirationSeconds
	}
	for _, id := range clientIDs {
		if c.clientID != "" && id != c.clientID {
			c.add(Step{Name: StepMutation, Status: Fail,
				Detail: fmt.Sprintf("the pod's AZURE_CLIENT_ID is %s but its service account names %s", id, c.clientID),
				Fix:    "the annotation changed after the pod was created, or the pod sets AZURE_CLIENT_ID itself: recreate the pod or remove its own value"})
			return
		}
	}
	detail := fmt.Sprintf("token volume with audience %s, %d s", c.audience, c.expiration)
	if len(unmutated) > 0 {
		detail += "; containers without the identity (skip-containers): " + strings.Join(unmutated, ", ")
	}
	c.add(Step{Name: StepMutation, Status: Pass, Detail: detail})
}

func (c *checker) webhookRegistered(ctx context.Context) (bool, error) {
	list, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, cfg := range list.Items {
		for _, w := range cfg.Webhooks {
			cc := w.ClientConfig
			if (cc.URL != nil && strings.HasSuffix(*cc.URL, wi.Path)) || (cc.Service != nil && cc.Service.Path != nil && *cc.Service.Path == wi.Path) {
				return true, nil
			}
		}
	}
	return false, nil
}

func tokenProjection(p *corev1.Pod) *corev1.ServiceAccountTokenProjection {
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.Path == wi.TokenVolume {
				return s.ServiceAccountToken
			}
		}
	}
	return nil
}

func (c *checker) clusterIssuer(ctx context.Context) {
	raw, err := c.kube.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		c.add(Step{Name: StepIssuer, Status: Error, Detail: "cannot read the cluster's /.well-known/openid-configuration: " + err.Error()})
		return
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Issuer == "" {
		c.add(Step{Name: StepIssuer, Status: Error, Detail: "the cluster's openid-configuration names no issuer"})
		return
	}
	c.issuer = doc.Issuer
	if c.opts.ExpectedIssuer != "" && c.opts.ExpectedIssuer != doc.Issuer {
		c.add(Step{Name: StepIssuer, Status: Fail,
			Detail: fmt.Sprintf("the cluster's issuer is %s, CERULEAN_OIDC_ISSUER says %s", doc.Issuer, c.opts.ExpectedIssuer),
			Fix:    "use the environment of this cluster (source its env file), or the cluster's issuer in the federated credentials"})
		return
	}
	// Entra ID fetches the discovery document and the keys anonymously, as here.
	if err := c.anonymousGet(ctx, strings.TrimSuffix(doc.Issuer, "/")+"/.well-known/openid-configuration"); err != nil {
		c.add(Step{Name: StepIssuer, Status: Fail, Detail: "Entra ID cannot read the issuer's discovery document anonymously: " + err.Error(),
			Fix: "allow anonymous reads of the issuer: kubectl create clusterrolebinding oidc-reviewer --clusterrole=system:service-account-issuer-discovery --group=system:unauthenticated"})
		return
	}
	if err := c.anonymousGet(ctx, doc.JWKSURI); err != nil {
		c.add(Step{Name: StepIssuer, Status: Fail, Detail: "Entra ID cannot read the issuer's keys at " + doc.JWKSURI + ": " + err.Error(),
			Fix: "serve the keys where jwks_uri says (kube-apiserver --service-account-jwks-uri) and allow anonymous reads"})
		return
	}
	c.add(Step{Name: StepIssuer, Status: Pass, Detail: doc.Issuer + " (discovery and keys readable anonymously)"})
}

// anonymousGet fetches u with no credentials, trusting the cluster's CA and the system roots.
func (c *checker) anonymousGet(ctx context.Context, u string) error {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	ca := c.opts.Kube.CAData
	if len(ca) == 0 && c.opts.Kube.CAFile != "" {
		if ca, err = os.ReadFile(c.opts.Kube.CAFile); err != nil {
			return fmt.Errorf("read the cluster's CA: %w", err)
		}
	}
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answers %s", u, resp.Status)
	}
	return nil
}
