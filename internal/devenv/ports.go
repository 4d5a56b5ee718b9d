package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
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

// keptPortsFrom is the lowest port chosen for a data directory. Kept ports are chosen below the
// kernel's ephemeral range, from which the kernel gives every outgoing connection its local port
// and every listener on port 0 (the local cloud's included) its port: a kept port in that range
// could be taken by any of them between two starts. It is above the ports this machine's services
// are known to use (Azurite's 10000 to 10002, the upstream webhook's 9443).
const keptPortsFrom = 20000

// ephemeralPortsPath holds the kernel's ephemeral range ("32768\t60999").
const ephemeralPortsPath = "/proc/sys/net/ipv4/ip_local_port_range"

// freePorts chooses n distinct free loopback ports between keptPortsFrom and the kernel's
// ephemeral range, or lets the kernel choose them when that range starts too low to leave room.
// Holding all listeners until every port is chosen keeps a port from being chosen twice.
func freePorts(n int) ([]int, error) {
	below := ephemeralStart()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		addr := "127.0.0.1:0"
		if below-keptPortsFrom >= 1000 && tries < 100*n {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(keptPortsFrom+rand.IntN(below-keptPortsFrom))) //nolint:gosec // a port, not a secret
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, fmt.Errorf("choose a free port: %w", err)
			}
			continue // taken: try another
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range, or 0 when it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile(ephemeralPortsPath)
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(fields[0])
	return n
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
