package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/google/uuid"
)

// assignmentNamespace seeds the deterministic role-assignment names (UUIDv5), so that a re-run
// finds the assignment it made instead of making another.
var assignmentNamespace = uuid.MustParse("6b0d3c1e-6f62-4c1e-9a57-2a1c5e0f7a11")

// AssignmentName is the name of the role assignment that grants roleDefinitionID on scope to
// principalID: the same three always give the same name.
func AssignmentName(scope, roleDefinitionID, principalID string) string {
	key := strings.ToLower(scope) + "|" + strings.ToLower(roleDefinitionID) + "|" + strings.ToLower(principalID)
	return uuid.NewSHA1(assignmentNamespace, []byte(key)).String()
}

// FederatedCredentialName is the name of the federated credential of subject (one per
// namespace and service account).
func FederatedCredentialName(namespace, serviceAccount string) string {
	n := "rollout-" + namespace + "-" + strings.ReplaceAll(serviceAccount, ".", "-")
	if len(n) > 120 {
		n = n[:120]
	}
	return n
}

// azureClients are the ARM clients of one subscription.
type azureClients struct {
	clusters   *armcontainerservice.ManagedClustersClient
	identities *armmsi.UserAssignedIdentitiesClient
	federated  *armmsi.FederatedIdentityCredentialsClient
	vaults     *armkeyvault.VaultsClient
	roleDefs   *armauthorization.RoleDefinitionsClient
	roles      *armauthorization.RoleAssignmentsClient
}

// armPool builds clients per subscription once.
type armPool struct {
	cred azcore.TokenCredential
	opts *arm.ClientOptions

	mu   sync.Mutex
	subs map[string]*azureClients
}

func newARMPool(cred azcore.TokenCredential, opts *arm.ClientOptions) *armPool {
	return &armPool{cred: cred, opts: opts, subs: map[string]*azureClients{}}
}

func (p *armPool) get(subscription string) (*azureClients, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.subs[subscription]; ok {
		return c, nil
	}
	var c azureClients
	var err error
	if c.clusters, err = armcontainerservice.NewManagedClustersClient(subscription, p.cred, p.opts); err != nil {
		return nil, fmt.Errorf("create ARM clients: %w", err)
	}
	if c.identities, err = armmsi.NewUserAssignedIdentitiesClient(subscription, p.cred, p.opts); err != nil {
		return nil, fmt.Errorf("create ARM clients: %w", err)
	}
	if c.federated, err = armmsi.NewFederatedIdentityCredentialsClient(subscription, p.cred, p.opts); err != nil {
		return nil, fmt.Errorf("create ARM clients: %w", err)
	}
	if c.vaults, err = armkeyvault.NewVaultsClient(subscription, p.cred, p.opts); err != nil {
		return nil, fmt.Errorf("create ARM clients: %w", err)
	}
	if c.roleDefs, err = armauthorization.NewRoleDefinitionsClient(p.cred, p.opts); err != nil {
		return nil, fmt.Errorf("create ARM clients: %w", err)
	}
	if c.roles, err = armauthorization.NewRoleAssignmentsClient(subscription, p.cred, p.opts); err != nil {
		return nil, fmt.Errorf("create ARM clients: %w", err)
	}
	p.subs[subscription] = &c
	return &c, nil
}

func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// errorCode is Azure's status, error code and message of err, or err's own message when it is
// not a response error. The SDK's full message is avoided: it spans lines with the request.
func errorCode(err error) string {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err.Error()
	}
	code := re.ErrorCode
	if code == "" {
		code = http.StatusText(re.StatusCode)
	}
	out := fmt.Sprintf("%d %s", re.StatusCode, code)
	if re.RawResponse != nil {
		if body, err := runtime.Payload(re.RawResponse); err == nil {
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
				out += ": " + e.Error.Message
			}
		}
	}
	return out
}

// clusterState is what the cluster step learnt.
type clusterState struct {
	location  string
	issuerURL string
}

// ensureCluster turns the OIDC issuer and workload identity on (a PUT only when one is off) and
// returns the cluster's issuer URL.
func ensureCluster(ctx context.Context, c *azureClients, id *arm.ResourceID) (clusterState, bool, error) {
	got, err := c.clusters.Get(ctx, id.ResourceGroupName, id.Name, nil)
	if err != nil {
		return clusterState{}, false, fmt.Errorf("read cluster: %s", errorCode(err))
	}
	mc := got.ManagedCluster
	changed := false
	if !oidcOn(mc) || !workloadIdentityOn(mc) {
		if mc.Properties == nil {
			mc.Properties = &armcontainerservice.ManagedClusterProperties{}
		}
		if mc.Properties.OidcIssuerProfile == nil {
			mc.Properties.OidcIssuerProfile = &armcontainerservice.ManagedClusterOIDCIssuerProfile{}
		}
		mc.Properties.OidcIssuerProfile.Enabled = to.Ptr(true)
		if mc.Properties.SecurityProfile == nil {
			mc.Properties.SecurityProfile = &armcontainerservice.ManagedClusterSecurityProfile{}
		}
		mc.Properties.SecurityProfile.WorkloadIdentity = &armcontainerservice.ManagedClusterSecurityProfileWorkloadIdentity{Enabled: to.Ptr(true)}
		poller, err := c.clusters.BeginCreateOrUpdate(ctx, id.ResourceGroupName, id.Name, mc, nil)
		if err != nil {
			return clusterState{}, false, fmt.Errorf("enable OIDC issuer and workload identity: %s", errorCode(err))
		}
		res, err := poller.PollUntilDone(ctx, nil)
		if err != nil {
			return clusterState{}, false, fmt.Errorf("enable OIDC issuer and workload identity: %s", errorCode(err))
		}
		mc, changed = res.ManagedCluster, true
	}
	st := clusterState{location: val(mc.Location)}
	if p := mc.Properties; p != nil && p.OidcIssuerProfile != nil {
		st.issuerURL = val(p.OidcIssuerProfile.IssuerURL)
	}
	if st.issuerURL == "" {
		return st, changed, errors.New("the cluster reports no OIDC issuer URL")
	}
	return st, changed, nil
}

func oidcOn(mc armcontainerservice.ManagedCluster) bool {
	p := mc.Properties
	return p != nil && p.OidcIssuerProfile != nil && val(p.OidcIssuerProfile.Enabled)
}

func workloadIdentityOn(mc armcontainerservice.ManagedCluster) bool {
	p := mc.Properties
	return p != nil && p.SecurityProfile != nil && p.SecurityProfile.WorkloadIdentity != nil && val(p.SecurityProfile.WorkloadIdentity.Enabled)
}

// identityState is the cluster's managed identity.
type identityState struct {
	id, clientID, principalID string
}

// ensureIdentity reads the identity and creates it when missing.
func ensureIdentity(ctx context.Context, c *azureClients, group, name, location string) (identityState, bool, error) {
	got, err := c.identities.Get(ctx, group, name, nil)
	changed := false
	switch {
	case err == nil:
	case isNotFound(err):
		res, err := c.identities.CreateOrUpdate(ctx, group, name, armmsi.Identity{Location: to.Ptr(location)}, nil)
		if err != nil {
			return identityState{}, false, fmt.Errorf("create identity %s/%s: %s", group, name, errorCode(err))
		}
		got.Identity, changed = res.Identity, true
	default:
		return identityState{}, false, fmt.Errorf("read identity %s/%s: %s", group, name, errorCode(err))
	}
	p := got.Properties
	if p == nil || p.ClientID == nil || p.PrincipalID == nil {
		return identityState{}, changed, fmt.Errorf("identity %s/%s has no client or principal id", group, name)
	}
	return identityState{id: val(got.ID), clientID: *p.ClientID, principalID: *p.PrincipalID}, changed, nil
}

// readIdentity reads the identity; found is false when it does not exist.
func readIdentity(ctx context.Context, c *azureClients, group, name string) (st identityState, found bool, err error) {
	got, err := c.identities.Get(ctx, group, name, nil)
	if isNotFound(err) {
		return identityState{}, false, nil
	}
	if err != nil {
		return identityState{}, false, fmt.Errorf("read identity %s/%s: %s", group, name, errorCode(err))
	}
	p := got.Properties
	if p == nil || p.ClientID == nil || p.PrincipalID == nil {
		return identityState{}, true, fmt.Errorf("identity %s/%s has no client or principal id", group, name)
	}
	return identityState{id: val(got.ID), clientID: *p.ClientID, principalID: *p.PrincipalID}, true, nil
}

// ensureFederatedCredential makes the identity trust subject from issuer for audience: a PUT only
// when the credential is missing or says something else.
func ensureFederatedCredential(ctx context.Context, c *azureClients, group, identity, name, issuer, subject, audience string) (bool, error) {
	got, err := c.federated.Get(ctx, group, identity, name, nil)
	switch {
	case err == nil:
		if p := got.Properties; p != nil && val(p.Issuer) == issuer && val(p.Subject) == subject &&
			len(p.Audiences) == 1 && val(p.Audiences[0]) == audience {
			return false, nil
		}
	case isNotFound(err):
	default:
		return false, fmt.Errorf("read federated credential %s: %s", name, errorCode(err))
	}
	_, err = c.federated.CreateOrUpdate(ctx, group, identity, name, armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer: to.Ptr(issuer), Subject: to.Ptr(subject), Audiences: []*string{to.Ptr(audience)},
		},
	}, nil)
	if err != nil {
		return false, fmt.Errorf("write federated credential %s: %s", name, errorCode(err))
	}
	return true, nil
}

// resolveRole turns the file's role (name, GUID or id) into a roleDefinitions id at scope.
func resolveRole(ctx context.Context, c *azureClients, scope *arm.ResourceID, role string) (string, error) {
	switch {
	case strings.Contains(role, "/"):
		return role, nil
	case roleGUID.MatchString(role):
		return "/subscriptions/" + scope.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + strings.ToLower(role), nil
	}
	pager := c.roleDefs.NewListPager(scope.String(), &armauthorization.RoleDefinitionsClientListOptions{
		Filter: to.Ptr("roleName eq '" + strings.ReplaceAll(role, "'", "''") + "'"),
	})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("find role %q: %s", role, errorCode(err))
		}
		for _, d := range page.Value {
			if d.Properties != nil && strings.EqualFold(val(d.Properties.RoleName), role) && d.Name != nil {
				return "/subscriptions/" + scope.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + *d.Name, nil
			}
		}
	}
	return "", fmt.Errorf("find role %q: no role definition of that name at %s", role, scope.String())
}

// ensureRole grants roleDefID on scope to principalID under the deterministic name.
func ensureRole(ctx context.Context, c *azureClients, scope, roleDefID, principalID string) (bool, error) {
	name := AssignmentName(scope, roleDefID, principalID)
	got, err := c.roles.Get(ctx, scope, name, nil)
	switch {
	case err == nil:
		if p := got.Properties; p != nil && strings.EqualFold(val(p.PrincipalID), principalID) &&
			strings.EqualFold(roleGUIDOf(val(p.RoleDefinitionID)), roleGUIDOf(roleDefID)) {
			return false, nil
		}
		return false, fmt.Errorf("role assignment %s exists for another principal or role", name)
	case isNotFound(err):
	default:
		return false, fmt.Errorf("read role assignment %s: %s", name, errorCode(err))
	}
	_, err = c.roles.Create(ctx, scope, name, armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr(roleDefID), PrincipalID: to.Ptr(principalID),
			PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil)
	if err != nil {
		return false, fmt.Errorf("create role assignment %s: %s", name, errorCode(err))
	}
	return true, nil
}

// removeRole deletes the deterministic assignment; false when there was none.
func removeRole(ctx context.Context, c *azureClients, scope, roleDefID, principalID string) (bool, error) {
	name := AssignmentName(scope, roleDefID, principalID)
	if _, err := c.roles.Get(ctx, scope, name, nil); isNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read role assignment %s: %s", name, errorCode(err))
	}
	if _, err := c.roles.Delete(ctx, scope, name, nil); err != nil {
		return false, fmt.Errorf("delete role assignment %s: %s", name, errorCode(err))
	}
	return true, nil
}

func roleGUIDOf(id string) string {
	return strings.ToLower(id[strings.LastIndex(id, "/")+1:])
}

// vaultURI reads the vault's data-plane address.
func vaultURI(ctx context.Context, c *azureClients, id *arm.ResourceID) (string, error) {
	got, err := c.vaults.Get(ctx, id.ResourceGroupName, id.Name, nil)
	if err != nil {
		return "", fmt.Errorf("read key vault %s: %s", id.Name, errorCode(err))
	}
	if got.Properties == nil || got.Properties.VaultURI == nil {
		return "", fmt.Errorf("read key vault %s: no vault URI", id.Name)
	}
	return *got.Properties.VaultURI, nil
}

// val is *p, or the zero value for nil.
func val[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
