package doctor

// The doctor's steps in Azure: the identity, its federated credential, the token exchange and
// the role assignments.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/internal/azure"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

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
