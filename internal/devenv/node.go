package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/images"
)

// NodeOptions configure StartNode.
type NodeOptions struct {
	// ProviderID is the node's spec.providerID: for pod identity, the id of a VMSS instance in
	// the local cloud (azure:///subscriptions/.../virtualMachineScaleSets/NAME/virtualMachines/0).
	ProviderID string
	// Images are OCI archives (package images) imported into the node's containerd before the
	// kubelet starts. The sandbox image, images.Pause, must be among them.
	Images []string
	// LockWait bounds the wait for another node on this machine to stop; 0 fails at once.
	LockWait time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// ReadyTimeout bounds the wait for each component; 0 means two minutes.
	ReadyTimeout time.Duration
}

// Node is the running local node: containerd, the kubelet (registered as NodeName),
// kube-scheduler, kube-proxy and CoreDNS, with pods on a bridge of this machine.
type Node struct {
	// Name is the node's name, NodeName.
	Name string
	// IP is the node's InternalIP, the bridge's address.
	IP string
	// ContainerdSocket is the node's containerd socket (ctr -a SOCKET -n k8s.io ...).
	ContainerdSocket string
	// Dir holds the node's state: DIR/node.
	Dir string

	cp       *ControlPlane
	paths    nodePaths
	mu       sync.Mutex // guards children: drivers start and stop while the node runs
	children []*child
	lock     *hostLock
	record   *hostRecord
	relay    *relay // pods' path to kube-apiserver (node_apiserver.go)
}

// ErrNeedsRoot reports that the node cannot run without root.
var ErrNeedsRoot = errors.New("the local node needs root (it creates a bridge, iptables rules, mounts and cgroups); run as root, or without a node")

// NodeBinaries are the node's programs in bin/; `make node` builds them.
var NodeBinaries = []string{"kubelet", "kube-scheduler", "kube-proxy", "coredns", "containerd", "containerd-shim-runc-v2", "ctr"}

// CheckNodeHost reports, with a clear error, whether this machine can run the node: root, the
// programs from `make node`, and the kernel features it uses.
func CheckNodeHost(binDir string) error {
	if os.Geteuid() != 0 {
		return ErrNeedsRoot
	}
	for _, name := range NodeBinaries {
		if !exists(filepath.Join(binDir, name)) {
			return fmt.Errorf("%s not found in %s: run `make node` to build and install the local node", name, binDir)
		}
	}
	if _, err := runcPath(); err != nil {
		return err
	}
	for _, tool := range []string{"iptables", "ip", "nft"} { // nft: kube-proxy drives it
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: run `make node` to install the local node's packages", tool)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if !exists(filepath.Join("/usr/lib/cni", plugin)) {
			return fmt.Errorf("CNI plugin %s not found in /usr/lib/cni: run `make node` (it installs containernetworking-plugins)", plugin)
		}
	}
	fss, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return fmt.Errorf("check kernel features: %w", err)
	}
	if !strings.Contains(string(fss), "\toverlay\n") {
		return errors.New("the kernel has no overlay filesystem (containerd's snapshotter needs it): load the overlay module (modprobe overlay)")
	}
	if !isDir("/sys/fs/cgroup/cpu") && !exists("/sys/fs/cgroup/cgroup.controllers") {
		return errors.New("no cgroup hierarchy with the cpu controller is mounted under /sys/fs/cgroup: the kubelet needs cgroups")
	}
	if !isDir("/sys/class/net") || !exists("/proc/sys/net/ipv4/ip_forward") {
		return errors.New("no IPv4 networking in /proc/sys/net: the node's pod network needs it")
	}
	return nil
}

// runcPath finds runc: Debian's package installs it in /usr/sbin.
func runcPath() (string, error) {
	if p, err := exec.LookPath("runc"); err == nil {
		return filepath.Abs(p)
	}
	if exists("/usr/sbin/runc") {
		return "/usr/sbin/runc", nil
	}
	return "", errors.New("runc not found: run `make node` to install the local node's packages")
}

// StartNode starts the node beside the control plane and returns once it is Ready, or an error
// after undoing what it did. It first cleans up after a node that was killed on this machine.
func (cp *ControlPlane) StartNode(ctx context.Context, opts NodeOptions) (_ *Node, err error) {
	if err := CheckNodeHost(cp.binDir); err != nil {
		return nil, err
	}
	runc, err := runcPath()
	if err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	say := func(s string) { fmt.Fprintln(progress, s) }
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	lock, err := lockHost(ctx, opts.LockWait, say)
	if err != nil {
		return nil, err
	}
	if cp.ports, err = refreshNodePorts(filepath.Join(cp.DataDir, "ports.json"), cp.ports); err != nil {
		lock.release()
		return nil, err
	}
	n := &Node{Name: NodeName, IP: NodeIP, cp: cp, paths: nodePaths{dir: filepath.Join(cp.DataDir, "node")}, lock: lock}
	n.Dir, n.ContainerdSocket = n.paths.dir, n.paths.socket()
	defer func() {
		if err != nil {
			if serr := n.Stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()

	if stale, err := readHostRecord(); err != nil {
		return nil, err
	} else if stale != nil {
		say(fmt.Sprintf("cleaning up after a node that did not stop (data directory %s)…", stale.DataDir))
		if err := teardown(stale); err != nil {
			return nil, fmt.Errorf("clean up after the previous node: %w", err)
		}
		if err := removeHostRecord(); err != nil {
			return nil, err
		}
	}
	// Whatever a run on this data directory left (a crash before the record was written).
	for _, d := range []string{n.Dir, n.paths.kubeletRoot()} {
		if err := unmountUnder(d); err != nil {
			return nil, err
		}
	}
	// The teardown kills every process in the kubepods cgroups: with another kubelet's pods
	// there, it would kill them too.
	if dirs := kubepodsDirs(); len(dirs) > 0 {
		return nil, fmt.Errorf("another kubelet's pod cgroups exist (%s): stop that kubelet first, the local node cannot share a machine with one", dirs[0])
	}
	if linkExists(Bridge) {
		return nil, fmt.Errorf("a network interface named %s exists and no cerulean node owns it: delete it (ip link del %s)", Bridge, Bridge)
	}
	if err := checkSubnetFree(); err != nil {
		return nil, err
	}
	if n.record, err = newHostRecord(cp.DataDir, n.paths); err != nil {
		return nil, err
	}
	if err := writeHostRecord(n.record); err != nil {
		return nil, err
	}
	if err := writeNodeConfig(n.paths, cp.ports, cp.pki, opts.ProviderID, runc); err != nil {
		return nil, err
	}
	if err := setupNetwork(cp.ports.Kubelet); err != nil {
		return nil, err
	}
	if n.relay, err = startRelay(net.JoinHostPort(NodeIP, strconv.Itoa(cp.ports.APIServer)), net.JoinHostPort("127.0.0.1", strconv.Itoa(cp.ports.APIServer))); err != nil {
		return nil, err
	}

	say("starting containerd…")
	env := []string{"PATH=" + cp.binDir + ":" + os.Getenv("PATH")}
	if err := n.start("containerd", filepath.Join(cp.binDir, "containerd"), []string{"--config", n.paths.containerdConfig(), "--log-level", "warn"}, env); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx, timeout, "containerd", n.containerdReady); err != nil {
		return nil, err
	}
	if err := n.importImages(ctx, opts.Images, say); err != nil {
		return nil, err
	}

	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	say("starting kube-scheduler…")
	if err := n.start("kube-scheduler", filepath.Join(cp.binDir, "kube-scheduler"), schedulerArgs(cp.DataDir, cp.ports, cp.pki), nil); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx, timeout, "kube-scheduler", healthz(cp.ports.Scheduler, cp.CACertPEM)); err != nil {
		return nil, err
	}
	say(fmt.Sprintf("starting the kubelet as node %s on %s…", NodeName, NodeIP))
	if err := n.start("kubelet", filepath.Join(cp.binDir, "kubelet"), kubeletArgs(n.paths, cp.DataDir), nil); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx, timeout, "node "+NodeName, nodeReady(cs)); err != nil {
		return nil, err
	}
	// After the Node exists: kube-proxy reads its own Node object at start.
	if err := n.startServices(ctx, cs, timeout, say); err != nil {
		return nil, err
	}
	return n, nil
}

// Stop stops the kubelet and kube-scheduler, removes every container, and undoes everything the
// node did to the machine. Containers and pods stay in the API: a node started again on the same
// data directory runs them again. It is safe to call more than once.
func (n *Node) Stop() error {
	if n == nil || n.lock == nil {
		return nil
	}
	for _, c := range slices.Backward(n.takeChildren()) {
		c.stop(15 * time.Second)
	}
	err := n.relay.stop()
	n.relay = nil
	if n.record != nil {
		if terr := teardown(n.record); terr != nil {
			err = errors.Join(err, terr)
		} else if rerr := removeHostRecord(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	n.lock.release()
	n.lock = nil
	if err != nil {
		return fmt.Errorf("stop node: %w", err)
	}
	return nil
}

// Exited returns a channel that is closed when a node process exits on its own, and a function
// that tells which one and why.
func (n *Node) Exited() (<-chan struct{}, func() error) {
	return exitedOf(n.currentChildren())
}

// Ctr runs ctr against the node's containerd in the k8s.io namespace (the one the kubelet uses).
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.cp.binDir, "ctr"), append([]string{"--address", n.paths.socket(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ImportImages loads OCI archives (package images) into the node; pods use them by name with
// imagePullPolicy IfNotPresent or Never.
func (n *Node) ImportImages(ctx context.Context, archives ...string) error {
	return n.importImages(ctx, archives, func(string) {})
}

func (n *Node) importImages(ctx context.Context, archives []string, say func(string)) error {
	// A node started again with the same archives has their images: importing them again took
	// 2 of every warm start's seconds.
	stamp := filepath.Join(n.paths.containerdRoot(), "cerulean-imported")
	want, err := archivesStamp(archives)
	if err != nil {
		return err
	}
	if had, err := os.ReadFile(stamp); err != nil || string(had) != want {
		_ = os.Remove(stamp)
		for _, a := range archives {
			say("importing image " + filepath.Base(a) + "…")
			if _, err := n.Ctr(ctx, "images", "import", "--snapshotter", "overlayfs", a); err != nil {
				return fmt.Errorf("import image %s: %w", a, err)
			}
		}
	}
	out, err := n.Ctr(ctx, "images", "list", "--quiet")
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	if !slices.Contains(strings.Fields(out), images.Pause) {
		return fmt.Errorf("the node has no sandbox image %s: run `make images` and import bin/images/pause.tar", images.Pause)
	}
	return fsutil.WriteFileAtomic(stamp, []byte(want), 0o600)
}

// archivesStamp names the archives as imported: each one's path, size and modification time.
func archivesStamp(archives []string) (string, error) {
	var b strings.Builder
	for _, a := range archives {
		fi, err := os.Stat(a)
		if err != nil {
			return "", fmt.Errorf("import image: %w", err)
		}
		fmt.Fprintf(&b, "%s %d %d\n", a, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

func (n *Node) start(name, bin string, args, env []string) error {
	c, err := startChild(name, bin, args, filepath.Join(n.cp.logs, name+".log"), env)
	if err != nil {
		return err
	}
	n.addChild(c)
	return nil
}

func (n *Node) addChild(c *child) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.children = append(n.children, c)
}

// removeChild forgets a process stopped on purpose (a driver), so that its exit is not taken
// for a crash of the node by later waits.
func (n *Node) removeChild(c *child) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.children = slices.DeleteFunc(n.children, func(x *child) bool { return x == c })
}

func (n *Node) currentChildren() []*child {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.children)
}

func (n *Node) takeChildren() []*child {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.children
	n.children = nil
	return c
}

func (n *Node) waitReady(ctx context.Context, timeout time.Duration, name string, ready func(context.Context) error) error {
	return waitFor(ctx, timeout, name, n.cp.logs, append(slices.Clone(n.cp.children), n.currentChildren()...), ready)
}

func (n *Node) containerdReady(ctx context.Context) error {
	if !exists(n.paths.socket()) {
		return errors.New("no socket yet")
	}
	_, err := n.Ctr(ctx, "version")
	return err
}

// nodeReady waits for the node to be Ready with the pod subnet the bridge was made for.
func nodeReady(cs kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Spec.PodCIDR != "" && node.Spec.PodCIDR != NodePodCIDR {
			return fmt.Errorf("node %s got pod subnet %s, the bridge is on %s (was another node registered? delete it)", NodeName, node.Spec.PodCIDR, NodePodCIDR)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue && node.Spec.PodCIDR != "" {
					return nil
				}
				return fmt.Errorf("node %s not ready: %s", NodeName, c.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", NodeName)
	}
}

// healthz polls a component's secure /healthz on loopback.
func healthz(port int, caPEM []byte) func(context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return func(ctx context.Context) error {
		_, err := httpGet(ctx, client, url)
		return err
	}
}
