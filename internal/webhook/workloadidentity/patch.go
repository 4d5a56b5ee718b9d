package workloadidentity

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sparsePod is the part of a pod that Mutate reads: decoding only it skips what a pod mostly is
// (resources, probes, security contexts, other volumes' sources), which the patch never touches.
type sparsePod struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		ServiceAccountName string            `json:"serviceAccountName"`
		HostNetwork        bool              `json:"hostNetwork"`
		InitContainers     []sparseContainer `json:"initContainers"`
		Containers         []sparseContainer `json:"containers"`
		Volumes            []sparseVolume    `json:"volumes"`
	} `json:"spec"`
}

// sparseContainer is what Mutate reads of a container: its env and mounts whole, as the proxy
// sidecar copies some of the app's.
type sparseContainer struct {
	Name         string               `json:"name"`
	Env          []corev1.EnvVar      `json:"env"`
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts"`
}

// sparseVolume is what addVolume reads of a volume.
type sparseVolume struct {
	Name      string `json:"name"`
	Projected *struct {
		Sources []struct {
			ServiceAccountToken *struct {
				Path string `json:"path"`
			} `json:"serviceAccountToken"`
		} `json:"sources"`
	} `json:"projected"`
}

// pod is the sparse pod as a corev1.Pod, for Mutate.
func (sp *sparsePod) pod() *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: sp.Metadata.Labels, Annotations: sp.Metadata.Annotations}}
	pod.Spec.ServiceAccountName = sp.Spec.ServiceAccountName
	pod.Spec.HostNetwork = sp.Spec.HostNetwork
	pod.Spec.InitContainers = containers(sp.Spec.InitContainers)
	pod.Spec.Containers = containers(sp.Spec.Containers)
	for _, v := range sp.Spec.Volumes {
		vol := corev1.Volume{Name: v.Name}
		if v.Projected != nil {
			vol.Projected = &corev1.ProjectedVolumeSource{}
			for _, s := range v.Projected.Sources {
				var p corev1.VolumeProjection
				if s.ServiceAccountToken != nil {
					p.ServiceAccountToken = &corev1.ServiceAccountTokenProjection{Path: s.ServiceAccountToken.Path}
				}
				vol.Projected.Sources = append(vol.Projected.Sources, p)
			}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
	}
	return pod
}

func containers(scs []sparseContainer) []corev1.Container {
	if scs == nil {
		return nil
	}
	cs := make([]corev1.Container, len(scs))
	for i, c := range scs {
		cs[i] = corev1.Container{Name: c.Name, Env: c.Env, VolumeMounts: c.VolumeMounts}
	}
	return cs
}

// shape is how much of a decoded pod there was before Mutate, which only ever appends: env
// variables, mounts and volumes at the end of their lists, the proxy's init container at the end
// and its sidecar at the front of the init containers.
type shape struct {
	init, containers []containerShape
	volumes          int
}

type containerShape struct {
	name        string
	env, mounts int
}

func shapeOf(pod *corev1.Pod) shape {
	of := func(cs []corev1.Container) []containerShape {
		out := make([]containerShape, len(cs))
		for i, c := range cs {
			out[i] = containerShape{name: c.Name, env: len(c.Env), mounts: len(c.VolumeMounts)}
		}
		return out
	}
	return shape{init: of(pod.Spec.InitContainers), containers: of(pod.Spec.Containers), volumes: len(pod.Spec.Volumes)}
}

// patchOp is one operation of a JSON patch. Encoded as plain fields, it is written once;
// jsonpatch.Operation's own MarshalJSON made encoding/json encode and then compact each again
// (a quarter of an admission's CPU).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// patch is the JSON patch from before to pod, built from what Mutate appended alone: only the
// new values are encoded, never the pod.
func patch(before shape, pod *corev1.Pod) []patchOp {
	var ops []patchOp
	add := func(path string, value any) {
		ops = append(ops, patchOp{Op: "add", Path: path, Value: value})
	}
	// appendTo adds the items of list past had; a list that was empty is added whole (the
	// member may be absent, and "-" needs an array).
	appendTo := func(path string, had, now int, item func(int) any, whole any) {
		switch {
		case now == had:
		case had == 0:
			add(path, whole)
		default:
			for i := had; i < now; i++ {
				add(path+"/-", item(i))
			}
		}
	}
	container := func(path string, was containerShape, c *corev1.Container) {
		appendTo(path+"/env", was.env, len(c.Env), func(i int) any { return c.Env[i] }, c.Env)
		appendTo(path+"/volumeMounts", was.mounts, len(c.VolumeMounts), func(i int) any { return c.VolumeMounts[i] }, c.VolumeMounts)
	}

	inits := pod.Spec.InitContainers
	if len(before.init) == 0 {
		if len(inits) > 0 {
			add("/spec/initContainers", inits) // all new: the proxy's
		}
	} else {
		front := 0
		if len(inits) > len(before.init) && inits[0].Name == ProxySidecarContainerName && before.init[0].name != ProxySidecarContainerName {
			front = 1
			add("/spec/initContainers/0", inits[0])
		}
		for i, was := range before.init {
			container("/spec/initContainers/"+strconv.Itoa(i+front), was, &inits[i+front])
		}
		for _, c := range inits[len(before.init)+front:] {
			add("/spec/initContainers/-", c)
		}
	}
	for i, was := range before.containers {
		container("/spec/containers/"+strconv.Itoa(i), was, &pod.Spec.Containers[i])
	}
	vs := pod.Spec.Volumes
	appendTo("/spec/volumes", before.volumes, len(vs), func(i int) any { return vs[i] }, vs)
	return ops
}
