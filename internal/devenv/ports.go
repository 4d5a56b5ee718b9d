package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/cerulean/cerulean/internal/fsutil"
)

// ports are chosen once and kept in DIR/ports.json: a restart must serve the issuer on the same
// URL, byte for byte, or every federated credential that names it breaks.
type ports struct {
	EtcdClient        int `json:"etcdClient"`
	EtcdPeer          int `json:"etcdPeer"`
	APIServer         int `json:"apiServer"`
	ControllerManager int `json:"controllerManager"`
	// The node's: kube-scheduler's secure port, the kubelet's (on the node's address) and its
	// health port. Added later than the others: a file without them gets them on load.
	Scheduler      int `json:"scheduler"`
	Kubelet        int `json:"kubelet"`
	KubeletHealthz int `json:"kubeletHealthz"`
}

// named lists the ports with the component that owns each, for error messages.
func (p ports) named() []struct {
	name string
	port int
} {
	return []struct {
		name string
		port int
	}{
		{"etcd", p.EtcdClient}, {"etcd peer", p.EtcdPeer},
		{"kube-apiserver", p.APIServer}, {"kube-controller-manager", p.ControllerManager},
		{"kube-scheduler", p.Scheduler}, {"kubelet", p.Kubelet}, {"kubelet health", p.KubeletHealthz},
	}
}

// loadOrChoosePorts reads DIR/ports.json, or picks free loopback ports and saves them.
// A requested API server port (non-zero) is used on the first start.
func loadOrChoosePorts(path string, apiServerPort int) (ports, error) {
	var p ports
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &p); err != nil {
			return p, fmt.Errorf("read %s: %w (delete it to choose new ports)", path, err)
		}
		if p.Scheduler != 0 && p.Kubelet != 0 && p.KubeletHealthz != 0 {
			return p, nil
		}
		free, err := freePorts(3)
		if err != nil {
			return p, err
		}
		p.Scheduler, p.Kubelet, p.KubeletHealthz = free[0], free[1], free[2]
		return p, savePorts(path, p)
	case !errors.Is(err, os.ErrNotExist):
		return p, fmt.Errorf("read %s: %w", path, err)
	}
	free, err := freePorts(7)
	if err != nil {
		return p, err
	}
	p = ports{EtcdClient: free[0], EtcdPeer: free[1], APIServer: free[2], ControllerManager: free[3],
		Scheduler: free[4], Kubelet: free[5], KubeletHealthz: free[6]}
	if apiServerPort != 0 {
		p.APIServer = apiServerPort
	}
	return p, savePorts(path, p)
}

// refreshNodePorts gives the node new loopback ports (kube-scheduler's, the kubelet's health
// port) when another process took one of them: they were chosen with the control plane, maybe
// long before a node that waited for the machine's lock starts, and they name nothing that must
// stay stable (the issuer's port does). The kubelet's own port is on the node's address, which
// only a node holding the lock uses.
func refreshNodePorts(path string, p ports) (ports, error) {
	err := refreshLoose(path, &p, &p.Scheduler, &p.KubeletHealthz)
	return p, err
}

// refreshControlPlanePorts gives kube-controller-manager a new port when another process took
// it between two starts (any process binding port 0 may get it, the local cloud's own listeners
// started just before included); it names nothing that must stay stable.
func refreshControlPlanePorts(path string, p ports) (ports, error) {
	err := refreshLoose(path, &p, &p.ControllerManager)
	return p, err
}

// refreshLoose re-chooses the loose ports (fields of p) when another process holds one of them,
// and saves p.
func refreshLoose(path string, p *ports, loose ...*int) error {
	taken := false
	for _, port := range loose {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
		if err != nil {
			taken = true
			break
		}
		_ = l.Close()
	}
	if !taken {
		return nil
	}
	free, err := freePorts(len(loose))
	if err != nil {
		return err
	}
	for i, port := range loose {
		*port = free[i]
	}
	return savePorts(path, *p)
}

func savePorts(path string, p ports) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// freePorts asks the kernel for n distinct free loopback ports. Holding all listeners until every
// port is chosen keeps the kernel from handing out the same port twice.
func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choose a free port: %w", err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ErrPortInUse reports that a port the data directory is bound to is taken by another process.
var ErrPortInUse = errors.New("port in use")

// portReleaseWait bounds the wait for a port to be released: a control plane killed a moment
// ago (kill -9 of up, then up again) still holds its ports while its processes finish exiting.
const portReleaseWait = 5 * time.Second

// checkFree fails with a clear message when another process holds one of the ports.
func (p ports) checkFree() error {
	deadline := time.Now().Add(portReleaseWait)
	for _, np := range p.named() {
		for {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(np.port)))
			if err == nil {
				_ = l.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: 127.0.0.1:%d (%s) is taken by another process; stop it (is another `cerulean-local up` running on this data directory?) or use another data directory", ErrPortInUse, np.port, np.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
