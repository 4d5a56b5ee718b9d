package devenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/images"
)

// The node's network: one bridge on a private subnet that exists only on this machine. The
// kubelet serves on the bridge's address, so kube-apiserver reaches it by a non-loopback IP (it
// refuses to proxy to a loopback kubelet).
const (
	// NodeName is the local node's name.
	NodeName = "cerulean-node-0"
	// ClusterCIDR is the pod network; kube-controller-manager gives the node the first /24.
	ClusterCIDR = "10.244.0.0/16"
	// ServiceCIDR is the cluster's service address range.
	ServiceCIDR = "10.0.0.0/24"
	// EngineCIDR is where the local cloud's PostgreSQL servers and Redis caches take their
	// addresses when pods must reach them (cloud.Options.EngineNet): not the pod network, but
	// local to this machine by the cloud's route, so a pod's packets to it go up the bridge to
	// the host with the pod's own source address.
	EngineCIDR = "10.245.0.0/16"
	// NodePodCIDR is the node's pod subnet.
	NodePodCIDR = "10.244.0.0/24"
	// NodeIP is the bridge's address: the node's InternalIP and every pod's gateway.
	NodeIP = "10.244.0.1"
	// Bridge is the name of the node's bridge.
	Bridge = "cerulean0"
	// cniNetwork names the CNI network (and its cache entries under /var/lib/cni).
	cniNetwork = "cerulean"
)

// nodePaths names everything the node keeps under DIR/node. Unix socket paths are limited to
// 107 bytes; the shortest names keep the data directory's own path free to be long. The kubelet's
// root directory is the exception: it holds sockets of its own and of CSI drivers, several
// levels deep, and nothing in it outlives the node, so it is /run/cerulean/kubelet.
type nodePaths struct{ dir string }

func (n nodePaths) path(elem ...string) string {
	return filepath.Join(append([]string{n.dir}, elem...)...)
}
func (n nodePaths) containerdConfig() string { return n.path("containerd.toml") }
func (n nodePaths) containerdRoot() string   { return n.path("containerd") }
func (n nodePaths) containerdState() string  { return n.path("run") }
func (n nodePaths) runcRoot() string         { return n.path("run", "runc") }
func (n nodePaths) socket() string           { return n.path("ctd.sock") }
func (n nodePaths) registryHosts() string    { return n.path("registry") }
func (n nodePaths) cniConfDir() string       { return n.path("cni", "net.d") }
func (n nodePaths) cniIPAMDir() string       { return n.path("cni", "ipam") }
func (n nodePaths) kubeletConfig() string    { return n.path("kubelet.yaml") }
func (n nodePaths) kubeletRoot() string      { return filepath.Join(hostDir, "kubelet") }
func (n nodePaths) kubeletCertDir() string   { return n.path("kubelet-pki") }
func (n nodePaths) podLogs() string          { return n.path("pod-logs") }
func (n nodePaths) resolvConf() string       { return n.path("resolv.conf") }

// maxSocketPath is the longest path a unix socket can have (sun_path less its NUL), less the
// ".ttrpc" suffix containerd adds for its second socket.
const maxSocketPath = 107 - len(".ttrpc")

// containerdConfig is containerd's config.toml: its own root, state and socket, the CRI plugin
// with runc from Debian and Debian's CNI plugins, and the two settings this kind of machine needs.
//
// restrict_oom_score_adj: processes here lack CAP_SYS_RESOURCE (PID 1 drops it from the bounding
// set), so the kernel refuses any oom_score_adj below 0; the CRI plugin writes -998 into every
// sandbox's spec, runc treats the refused write as fatal ("can't get final child's PID from pipe:
// EOF"). Clamping to containerd's own score (0) is the fix.
func containerdConfig(n nodePaths, runc string) string {
	q := strconv.Quote
	return `version = 3
root = ` + q(n.containerdRoot()) + `
state = ` + q(n.containerdState()) + `

[grpc]
  address = ` + q(n.socket()) + `

[ttrpc]
  address = ` + q(n.socket()+".ttrpc") + `

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  cdi_spec_dirs = []

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = ` + q(runc) + `
        Root = ` + q(n.runcRoot()) + `
        SystemdCgroup = false

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = ` + q(n.cniConfDir()) + `
    max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ` + q(images.Pause) + `

  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = ` + q(n.registryHosts()) + `
`
}

// registryHostsDefault is containerd's hosts.toml for every registry (the _default directory):
// each pull goes to a loopback port nothing listens on, so it fails at once and no name is looked
// up outside this machine. Images are imported, never pulled.
const registryHostsDefault = `server = "https://127.0.0.1:9"

[host."https://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
`

// cniConfig is the pod network: a bridge with the node's address as every pod's gateway and
// default route, host-local addresses from the node's pod subnet, state under DIR/node. No
// masquerading: pod traffic never leaves the machine (a FORWARD rule also drops it).
func cniConfig(n nodePaths) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":             "bridge",
			"bridge":           Bridge,
			"isGateway":        true,
			"isDefaultGateway": true,
			"ipMasq":           false,
			"hairpinMode":      true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": NodePodCIDR, "gateway": NodeIP}}},
				"dataDir": n.cniIPAMDir(),
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the kubelet's configuration; each setting that differs from the defaults is
// one this machine or this control plane needs (docs/architecture.md has the reasons).
func kubeletConfig(n nodePaths, p ports, pki pkiFiles, providerID string) string {
	q := strconv.Quote
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ` + NodeIP + `
port: ` + strconv.Itoa(p.Kubelet) + `
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ` + strconv.Itoa(p.KubeletHealthz) + `
tlsCertFile: ` + q(pki.kubeletServingCert()) + `
tlsPrivateKeyFile: ` + q(pki.kubeletServingKey()) + `
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ` + q(pki.caCert()) + `
authorization:
  mode: Webhook
containerRuntimeEndpoint: ` + q("unix://"+n.socket()) + `
providerID: ` + q(providerID) + `
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
clusterDNS: [` + DNSServiceIP + `]
clusterDomain: ` + ClusterDomain + `
resolvConf: ` + q(n.resolvConf()) + `
podLogsDir: ` + q(n.podLogs()) + `
serializeImagePulls: false
`
}

func kubeletArgs(n nodePaths, dataDir string) []string {
	return []string{
		"--config=" + n.kubeletConfig(),
		"--kubeconfig=" + filepath.Join(dataDir, "kubelet.kubeconfig"),
		"--root-dir=" + n.kubeletRoot(),
		"--cert-dir=" + n.kubeletCertDir(),
		"--hostname-override=" + NodeName,
		"--node-ip=" + NodeIP,
		"--v=1",
	}
}

func schedulerArgs(dataDir string, p ports, pki pkiFiles) []string {
	kubeconfig := filepath.Join(dataDir, "kube-scheduler.kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.Scheduler),
		"--tls-cert-file=" + pki.servingCert(),
		"--tls-private-key-file=" + pki.servingKey(),
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

// writeNodeConfig writes every configuration file of the node.
func writeNodeConfig(n nodePaths, p ports, pki pkiFiles, providerID, runc string) error {
	if len(n.socket()) > maxSocketPath {
		return fmt.Errorf("write node configuration: the data directory's path is too long for containerd's socket %s (at most %d bytes): use a shorter --data-dir", n.socket(), maxSocketPath)
	}
	for _, d := range []string{n.dir, n.cniConfDir(), n.cniIPAMDir(), filepath.Join(n.registryHosts(), "_default"), n.kubeletRoot(), n.kubeletCertDir(), n.podLogs()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("write node configuration: %w", err)
		}
	}
	cni, err := cniConfig(n)
	if err != nil {
		return fmt.Errorf("write node configuration: %w", err)
	}
	files := []struct {
		path string
		data string
	}{
		{n.containerdConfig(), containerdConfig(n, runc)},
		{filepath.Join(n.registryHosts(), "_default", "hosts.toml"), registryHostsDefault},
		{filepath.Join(n.cniConfDir(), "10-"+cniNetwork+".conflist"), string(cni)},
		{n.kubeletConfig(), kubeletConfig(n, p, pki, providerID)},
		// No lookup from a pod leaves the machine: the only name server named (for pods with
		// dnsPolicy Default) is the node's own address, where CoreDNS answers.
		{n.resolvConf(), "nameserver " + NodeIP + "\n"},
	}
	for _, f := range files {
		if err := fsutil.WriteFileAtomic(f.path, []byte(f.data), 0o644); err != nil { //nolint:gosec // configuration, no secrets
			return fmt.Errorf("write node configuration: %w", err)
		}
	}
	return nil
}

// hasPrefixPath reports whether p is dir or below it.
func hasPrefixPath(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
