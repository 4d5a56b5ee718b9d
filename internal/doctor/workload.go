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
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	authenticationv1 "k8s.io/api/authentication/v1"
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

func (c *checker) azureIdentity(ctx context.Context) {
	if c.clientID == "" {
		c.add(Step{Name: StepIdentity, Status: Skip, Detail: "no client id to look up"})
		return
	}
	cred, err := c.opts.Azure.Credential()
	if err == nil {
		c.azOpts, err = c.opts.Azure.ClientOptions()
	}
	if err != nil || c.opts.Azure.SubscriptionID == "" {
		c.add(Step{Name: StepIdentity, Status: Error, Detail: fmt.Sprintf("no Azure access to look up client id %s: %v", c.clientID, orErr(err, "AZURE_SUBSCRIPTION_ID is not set")),
			Fix: "set the AZURE_* variables (eval \"$(cerulean-local cloud env)\", or source DIR/env of cerulean-local up)"})
		return
	}
	c.cred = cred
	ids, err := armmsi.NewUserAssignedIdentitiesClient(c.opts.Azure.SubscriptionID, cred, &arm.ClientOptions{ClientOptions: c.azOpts})
	if err != nil {
		c.add(Step{Name: StepIdentity, Status: Error, Detail: err.Error()})
		return
	}
	pager := ids.NewListBySubscriptionPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			c.add(Step{Name: StepIdentity, Status: Error, Detail: "cannot list user-assigned identities: " + shortErr(err)})
			return
		}
		for _, id := range page.Value {
			if id.Properties != nil && id.Properties.ClientID != nil && strings.EqualFold(*id.Properties.ClientID, c.clientID) {
				c.identity = id
			}
		}
	}
	if c.identity == nil {
		c.add(Step{Name: StepIdentity, Status: Fail,
			Detail: fmt.Sprintf("no user-assigned identity in subscription %s has client id %s (Entra ID would answer AADSTS700016)", c.opts.Azure.SubscriptionID, c.clientID),
			Fix:    fmt.Sprintf("set %s on the service account to the identity's clientId (status.clientId of its UserAssignedIdentity, or az identity show)", wi.ClientIDAnnotation)})
		return
	}
	c.add(Step{Name: StepIdentity, Status: Pass, Detail: *c.identity.ID})
}

func orErr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

var aadsts = regexp.MustCompile(`AADSTS\d+: [^\n]*`)

// shortErr keeps an SDK error to its Azure code and message: never a token (the SDK echoes
// neither tokens nor assertions), and not the whole HTTP trace.
func shortErr(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("%d %s", re.StatusCode, re.ErrorCode)
	}
	if m := aadsts.FindString(err.Error()); m != "" {
		if i := strings.Index(m, " Trace ID:"); i > 0 {
			m = m[:i]
		}
		return m
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	return s
}

func (c *checker) federatedCredential(ctx context.Context) {
	if c.identity == nil {
		c.add(Step{Name: StepFederatedCredential, Status: Skip, Detail: "no identity"})
		return
	}
	rg, name, err := groupAndName(*c.identity.ID)
	if err != nil {
		c.add(Step{Name: StepFederatedCredential, Status: Error, Detail: err.Error()})
		return
	}
	fics, err := armmsi.NewFederatedIdentityCredentialsClient(c.opts.Azure.SubscriptionID, c.cred, &arm.ClientOptions{ClientOptions: c.azOpts})
	if err != nil {
		c.add(Step{Name: StepFederatedCredential, Status: Error, Detail: err.Error()})
		return
	}
	presents := fmt.Sprintf("issuer %s, subject %s, audience %s", orDefault(c.issuer, "(unknown)"), c.subject(), c.audience)
	var diffs []string
	pager := fics.NewListPager(rg, name, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			c.add(Step{Name: StepFederatedCredential, Status: Error, Detail: "cannot list federated credentials: " + shortErr(err)})
			return
		}
		for _, f := range page.Value {
			p := f.Properties
			if p == nil {
				continue
			}
			var diff []string
			if str(p.Issuer) != c.issuer {
				diff = append(diff, "issuer "+str(p.Issuer))
			}
			if str(p.Subject) != c.subject() {
				diff = append(diff, "subject "+str(p.Subject))
			}
			if !slices.ContainsFunc(p.Audiences, func(a *string) bool { return str(a) == c.audience }) {
				var auds []string
				for _, a := range p.Audiences {
					auds = append(auds, str(a))
				}
				diff = append(diff, "audiences ["+strings.Join(auds, ", ")+"]")
			}
			if len(diff) == 0 {
				c.add(Step{Name: StepFederatedCredential, Status: Pass, Detail: fmt.Sprintf("%q matches %s", str(f.Name), presents)})
				return
			}
			diffs = append(diffs, fmt.Sprintf("%q has %s", str(f.Name), strings.Join(diff, ", ")))
		}
	}
	detail := fmt.Sprintf("the pod presents %s; identity %s has no federated credential for it", presents, name)
	if len(diffs) > 0 {
		detail += ": " + strings.Join(diffs, "; ")
	}
	detail += " (Entra ID answers AADSTS70021/AADSTS700213)"
	c.add(Step{Name: StepFederatedCredential, Status: Fail, Detail: detail,
		Fix: fmt.Sprintf("add a federated credential to identity %s with issuer %s, subject %s and audiences [%s]\n"+
			"(a FederatedIdentityCredential owned by its UserAssignedIdentity, or az identity federated-credential create -g %s --identity-name %s --name NAME --issuer %s --subject %s --audiences %s)",
			name, orDefault(c.issuer, "<the cluster's issuer>"), c.subject(), c.audience, rg, name, orDefault(c.issuer, "ISSUER"), c.subject(), c.audience)})
}

func groupAndName(id string) (string, string, error) {
	parts := strings.Split(strings.Trim(id, "/"), "/")
	if len(parts) < 8 || !strings.EqualFold(parts[2], "resourceGroups") {
		return "", "", fmt.Errorf("%q is not an identity id", id)
	}
	return parts[3], parts[len(parts)-1], nil
}

func (c *checker) tokenExchange(ctx context.Context) {
	if c.identity == nil || c.sa == nil || c.issuer == "" {
		c.add(Step{Name: StepTokenExchange, Status: Skip, Detail: "needs the service account, the issuer and the identity"})
		return
	}
	tr, err := c.kube.CoreV1().ServiceAccounts(c.ns).CreateToken(ctx, c.saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{c.audience}, ExpirationSeconds: to.Ptr(c.expiration)},
	}, metav1.CreateOptions{})
	if err != nil {
		c.add(Step{Name: StepTokenExchange, Status: Error, Detail: fmt.Sprintf("cannot request a token of %s/%s as the pod would get: %v", c.ns, c.saName, err),
			Fix: "the doctor needs create on serviceaccounts/token in the namespace"})
		return
	}
	cred, err := azure.NewCredential(azure.ClientCredential{
		TenantID: orDefault(c.tenantID, c.opts.Azure.TenantID), ClientID: *c.identity.Properties.ClientID,
		Assertion: func(context.Context) (string, error) { return tr.Status.Token, nil },
	}, c.azOpts)
	if err != nil {
		c.add(Step{Name: StepTokenExchange, Status: Error, Detail: err.Error()})
		return
	}
	scope := "https://management.core.windows.net//.default"
	if a := c.opts.Azure.ResourceManagerAudience; a != "" {
		scope = strings.TrimSuffix(a, "/") + "//.default"
	}
	if _, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}}); err != nil {
		msg := shortErr(err)
		fix := "see the federated-credential step"
		switch {
		case strings.Contains(msg, "AADSTS700024"):
			fix = "the token is outside its validity at Entra ID: compare the cluster's and Entra ID's clocks; an app must re-read the token file, not cache it"
		case strings.Contains(msg, "AADSTS700016"):
			fix = "the client id is unknown to the tenant: check " + wi.ClientIDAnnotation + " and " + wi.TenantIDAnnotation
		case strings.Contains(msg, "AADSTS700027"), strings.Contains(msg, "AADSTS50166"):
			fix = "Entra ID cannot verify the token with the issuer's keys: check that the issuer's jwks_uri is reachable and current"
		}
		c.add(Step{Name: StepTokenExchange, Status: Fail, Detail: "Entra ID refused the pod's token: " + msg, Fix: fix})
		return
	}
	c.add(Step{Name: StepTokenExchange, Status: Pass, Detail: fmt.Sprintf("Entra ID issued an access token to %s for a token of %s", *c.identity.Properties.ClientID, c.subject())})
}

func (c *checker) roleAssignments(ctx context.Context) {
	if c.opts.Scope == "" {
		c.add(Step{Name: StepRoleAssignments, Status: Skip, Detail: "no --scope given"})
		return
	}
	if c.identity == nil || c.identity.Properties == nil || c.identity.Properties.PrincipalID == nil {
		c.add(Step{Name: StepRoleAssignments, Status: Skip, Detail: "no identity"})
		return
	}
	principal := *c.identity.Properties.PrincipalID
	ras, err := armauthorization.NewRoleAssignmentsClient(c.opts.Azure.SubscriptionID, c.cred, &arm.ClientOptions{ClientOptions: c.azOpts})
	if err != nil {
		c.add(Step{Name: StepRoleAssignments, Status: Error, Detail: err.Error()})
		return
	}
	var roles []string
	pager := ras.NewListForScopePager(c.opts.Scope, &armauthorization.RoleAssignmentsClientListForScopeOptions{Filter: to.Ptr("principalId eq '" + principal + "'")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			c.add(Step{Name: StepRoleAssignments, Status: Error, Detail: "cannot list role assignments at " + c.opts.Scope + ": " + shortErr(err)})
			return
		}
		for _, a := range page.Value {
			if a.Properties == nil || a.Properties.Scope == nil || !covers(*a.Properties.Scope, c.opts.Scope) {
				continue
			}
			roles = append(roles, fmt.Sprintf("%s at %s", roleName(str(a.Properties.RoleDefinitionID)), *a.Properties.Scope))
		}
	}
	if len(roles) == 0 {
		c.add(Step{Name: StepRoleAssignments, Status: Fail,
			Detail: fmt.Sprintf("identity principal %s has no role assignment at or above %s: calls there are refused with 403", principal, c.opts.Scope),
			Fix: fmt.Sprintf("assign a role there, e.g. a RoleAssignment with principalId %s and roleDefinitionReference.wellKnownName \"Key Vault Secrets User\", "+
				"or az role assignment create --assignee-object-id %s --assignee-principal-type ServicePrincipal --role \"Key Vault Secrets User\" --scope %s", principal, principal, c.opts.Scope)})
		return
	}
	c.add(Step{Name: StepRoleAssignments, Status: Pass, Detail: strings.Join(roles, "; ")})
}

// covers reports whether an assignment at scope applies to target (the same scope or above it).
func covers(scope, target string) bool {
	s, t := strings.ToLower(strings.TrimSuffix(scope, "/")), strings.ToLower(strings.TrimSuffix(target, "/"))
	return s == t || strings.HasPrefix(t, s+"/") || s == ""
}

// builtInRoles names the role definitions users assign most for workload identity.
var builtInRoles = map[string]string{
	"8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
	"b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
	"acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader",
	"4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User",
	"b86a8fe4-44ce-4948-aee5-eccb2c155cd7": "Key Vault Secrets Officer",
	"00482a5a-887f-4fb3-b363-3b7fe8e74483": "Key Vault Administrator",
	"f1a07417-d97a-45cb-824c-7a7467783830": "Managed Identity Operator",
}

func roleName(definitionID string) string {
	id := definitionID[strings.LastIndex(definitionID, "/")+1:]
	if n, ok := builtInRoles[strings.ToLower(id)]; ok {
		return n
	}
	return "role " + id
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
