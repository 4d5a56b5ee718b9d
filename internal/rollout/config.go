package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"sigs.k8s.io/yaml"
)

// DefaultAudience is the audience of the federated credential and of the service account's token.
const DefaultAudience = "api://AzureADTokenExchange"

// DefaultClientIDValue is where, in the chart's values, the identity's client id is set.
const DefaultClientIDValue = "workloadIdentity.clientId"

// ErrInvalidConfig marks a rollout file that was refused; the message names the field.
var ErrInvalidConfig = errors.New("invalid rollout file")

// Config is the rollout file (rollout.yaml). Relative paths in it are relative to the file.
type Config struct {
	// Clusters are the AKS clusters to roll out to, in this order.
	Clusters []Cluster `json:"clusters"`
	// KeyVault is the shared vault every cluster's identity is granted a role on.
	KeyVault KeyVault `json:"keyVault"`
	// Role is the role granted on the vault: a built-in or custom role's name ("Key Vault
	// Secrets User"), its GUID, or its full roleDefinitions id.
	Role string `json:"role"`
	// Identity says where the per-cluster managed identities live.
	Identity Identity `json:"identity,omitempty"`
	// App is the application's Helm chart.
	App App `json:"app"`
	// Namespace and ServiceAccount are the app's, as its chart creates them; the federated
	// credential's subject is system:serviceaccount:NAMESPACE:SERVICEACCOUNT.
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
	// Audience of the federated credential; default api://AzureADTokenExchange.
	Audience string `json:"audience,omitempty"`

	dir string // the file's directory
}

// Cluster is one target cluster.
type Cluster struct {
	// ID is the managedCluster's ARM id.
	ID string `json:"id"`
	// Kubeconfig is a kubeconfig file for the cluster; empty means $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context to use; empty means the file's current context.
	Context string `json:"context,omitempty"`
	// Namespace overrides the top-level namespace for this cluster.
	Namespace string `json:"namespace,omitempty"`

	id *arm.ResourceID
}

// Name is the cluster's name (the last segment of its id).
func (c Cluster) Name() string { return c.id.Name }

// KeyVault names the shared vault.
type KeyVault struct {
	// ID is the vault's ARM id.
	ID string `json:"id"`
	// VerifySecret is a secret the verify step reads with the cluster's identity; empty skips
	// the read (the token exchange is still verified).
	VerifySecret string `json:"verifySecret,omitempty"`

	id *arm.ResourceID
}

// Identity configures the managed identities, one per cluster, named after the cluster.
type Identity struct {
	// ResourceGroup holds the identities; empty means each cluster's own resource group.
	ResourceGroup string `json:"resourceGroup,omitempty"`
	// Suffix is appended to the cluster's name to name its identity (default none).
	Suffix string `json:"suffix,omitempty"`
}

// App is the application's chart.
type App struct {
	// Chart is the chart's directory or .tgz archive.
	Chart string `json:"chart"`
	// Release is the Helm release name; default the chart's name.
	Release string `json:"release,omitempty"`
	// ValuesFiles are merged in order, then Values on top.
	ValuesFiles []string       `json:"valuesFiles,omitempty"`
	Values      map[string]any `json:"values,omitempty"`
	// ClientIDValue is the dotted path in the values where the identity's client id goes
	// (the chart puts it on the service account's azure.workload.identity/client-id
	// annotation); default workloadIdentity.clientId.
	ClientIDValue string `json:"clientIdValue,omitempty"`
}

// Kubernetes names (RFC 1123 label for namespaces, subdomain for service accounts and releases).
var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	// Managed identity names: 3-128 characters, letters, digits, '-' and '_', starting with a
	// letter or digit.
	identityName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{2,127}$`)
	roleGUID     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	valuePath    = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

// Load reads and validates a rollout file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rollout file: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read rollout file: %w", err)
	}
	return Parse(b, filepath.Dir(abs))
}

// Parse reads a rollout file's content (YAML or JSON; unknown fields are refused); relative
// paths are taken from dir.
func Parse(b []byte, dir string) (*Config, error) {
	var c Config
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: the file is empty", ErrInvalidConfig)
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c.dir = dir
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

func (c *Config) validate() error {
	if len(c.Clusters) == 0 {
		return invalid("clusters", "at least one cluster is required")
	}
	seen := map[string]int{}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		field := fmt.Sprintf("clusters[%d].id", i)
		if cl.ID == "" {
			return invalid(field, "required: the managedCluster's ARM id")
		}
		id, err := arm.ParseResourceID(cl.ID)
		if err != nil {
			return invalid(field, "%q is not an ARM resource id: %v", cl.ID, err)
		}
		if !strings.EqualFold(id.ResourceType.String(), "Microsoft.ContainerService/managedClusters") || id.ResourceGroupName == "" {
			return invalid(field, "%q is not a Microsoft.ContainerService/managedClusters id", cl.ID)
		}
		cl.id = id
		if j, dup := seen[strings.ToLower(id.Name)]; dup {
			return invalid(field, "cluster name %q is also clusters[%d]'s: identities are named after clusters, so names must differ", id.Name, j)
		}
		seen[strings.ToLower(id.Name)] = i
		if cl.Namespace != "" && !dnsLabel.MatchString(cl.Namespace) {
			return invalid(fmt.Sprintf("clusters[%d].namespace", i), "%q is not a valid namespace name", cl.Namespace)
		}
		if cl.Kubeconfig != "" {
			cl.Kubeconfig = c.path(cl.Kubeconfig)
		}
		if n := cl.Name() + c.Identity.Suffix; !identityName.MatchString(n) {
			return invalid(field, "the identity name %q (cluster name + identity.suffix) is not a valid managed identity name (3-128 letters, digits, '-', '_')", n)
		}
	}
	if c.KeyVault.ID == "" {
		return invalid("keyVault.id", "required: the shared Key Vault's ARM id")
	}
	vid, err := arm.ParseResourceID(c.KeyVault.ID)
	if err != nil {
		return invalid("keyVault.id", "%q is not an ARM resource id: %v", c.KeyVault.ID, err)
	}
	if !strings.EqualFold(vid.ResourceType.String(), "Microsoft.KeyVault/vaults") {
		return invalid("keyVault.id", "%q is not a Microsoft.KeyVault/vaults id", c.KeyVault.ID)
	}
	c.KeyVault.id = vid
	switch r := c.Role; {
	case r == "":
		return invalid("role", "required: a role name such as \"Key Vault Secrets User\", its GUID or its roleDefinitions id")
	case strings.Contains(r, "/"):
		id, err := arm.ParseResourceID(r)
		if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Authorization/roleDefinitions") || !roleGUID.MatchString(id.Name) {
			return invalid("role", "%q is neither a role name nor a roleDefinitions id", r)
		}
	}
	if c.Identity.ResourceGroup != "" && len(c.Identity.ResourceGroup) > 90 {
		return invalid("identity.resourceGroup", "at most 90 characters")
	}
	if c.App.Chart == "" {
		return invalid("app.chart", "required: the chart's directory or .tgz archive")
	}
	c.App.Chart = c.path(c.App.Chart)
	if _, err := os.Stat(c.App.Chart); err != nil {
		return invalid("app.chart", "%v", err)
	}
	for i, f := range c.App.ValuesFiles {
		c.App.ValuesFiles[i] = c.path(f)
		if _, err := os.Stat(c.App.ValuesFiles[i]); err != nil {
			return invalid(fmt.Sprintf("app.valuesFiles[%d]", i), "%v", err)
		}
	}
	if c.App.Release != "" && (!dnsSubdomain.MatchString(c.App.Release) || len(c.App.Release) > 53) {
		return invalid("app.release", "%q is not a valid release name (lower-case letters, digits, '-', '.', at most 53)", c.App.Release)
	}
	if c.App.ClientIDValue == "" {
		c.App.ClientIDValue = DefaultClientIDValue
	}
	if !valuePath.MatchString(c.App.ClientIDValue) {
		return invalid("app.clientIdValue", "%q is not a dotted values path such as workloadIdentity.clientId", c.App.ClientIDValue)
	}
	if c.Namespace == "" {
		return invalid("namespace", "required: the app's namespace")
	}
	if !dnsLabel.MatchString(c.Namespace) {
		return invalid("namespace", "%q is not a valid namespace name", c.Namespace)
	}
	if c.ServiceAccount == "" {
		return invalid("serviceAccount", "required: the app's service account, as its chart names it")
	}
	if !dnsSubdomain.MatchString(c.ServiceAccount) {
		return invalid("serviceAccount", "%q is not a valid service account name", c.ServiceAccount)
	}
	if c.Audience == "" {
		c.Audience = DefaultAudience
	}
	return nil
}

func (c *Config) path(p string) string {
	if filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}

// namespaceOf is the app's namespace on cluster cl.
func (c *Config) namespaceOf(cl Cluster) string {
	if cl.Namespace != "" {
		return cl.Namespace
	}
	return c.Namespace
}

// Subject is the federated credential's subject on cluster cl.
func (c *Config) Subject(cl Cluster) string {
	return "system:serviceaccount:" + c.namespaceOf(cl) + ":" + c.ServiceAccount
}

// identityGroup is the resource group of cluster cl's identity.
func (c *Config) identityGroup(cl Cluster) string {
	if c.Identity.ResourceGroup != "" {
		return c.Identity.ResourceGroup
	}
	return cl.id.ResourceGroupName
}

// IdentityName is cluster cl's identity's name.
func (c *Config) IdentityName(cl Cluster) string { return cl.Name() + c.Identity.Suffix }

// Cluster returns the cluster of that name (case-insensitive).
func (c *Config) Cluster(name string) (Cluster, bool) {
	for _, cl := range c.Clusters {
		if strings.EqualFold(cl.Name(), name) {
			return cl, true
		}
	}
	return Cluster{}, false
}
