package contract

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestVisitPodConfigMaps(t *testing.T) {
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	configMapVolume := func(volume, name string) corev1.Volume {
		return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref(name)}}}
	}
	envFrom := func(name string) []corev1.EnvFromSource {
		return []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref(name)}}}
	}
	envVar := func(variable, name string) corev1.EnvVar {
		return corev1.EnvVar{Name: variable, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref(name), Key: "k"}}}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []PodConfigMapUse
	}{
		{"nothing", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}, nil},
		{"a configMap volume", corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume("v", "a")}},
			[]PodConfigMapUse{{Name: "a", Volume: "v"}}},
		{"projected sources", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("a")}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: ref("s")}},
			{DownwardAPI: &corev1.DownwardAPIProjection{}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("b")}},
		}}}}}}, []PodConfigMapUse{{Name: "a", Volume: "p", Projected: true}, {Name: "b", Volume: "p", Projected: true}}},
		{"a secret volume", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "a"}}}}}, nil},
		{"a volume with two sources, as the apiserver would refuse it", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			HostPath:  &corev1.HostPathVolumeSource{Path: "/"},
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("a")},
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("b")}}}},
		}}}}, []PodConfigMapUse{{Name: "a", Volume: "v"}, {Name: "b", Volume: "v", Projected: true}}},
		{"env and envFrom", corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("s"), Key: "k"}}},
				envVar("LEVEL", "a"),
			},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("s")}}, envFrom("b")[0]},
		}}}, []PodConfigMapUse{
			{Name: "a", Container: "app", ContainerKind: RegularContainer, EnvVar: "LEVEL"},
			{Name: "b", Container: "app", ContainerKind: RegularContainer},
		}},
		{"every kind of container, volumes first", corev1.PodSpec{
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", EnvFrom: envFrom("e")}}},
			Containers:          []corev1.Container{{Name: "app", Env: []corev1.EnvVar{envVar("V", "c")}}},
			InitContainers:      []corev1.Container{{Name: "init", EnvFrom: envFrom("i")}},
			Volumes:             []corev1.Volume{configMapVolume("v", "a")},
		}, []PodConfigMapUse{
			{Name: "a", Volume: "v"},
			{Name: "i", Container: "init", ContainerKind: InitContainer},
			{Name: "c", Container: "app", ContainerKind: RegularContainer, EnvVar: "V"},
			{Name: "e", Container: "debug", ContainerKind: EphemeralContainer},
		}},
		{"repeats and empty names are visited as written", corev1.PodSpec{
			Volumes:    []corev1.Volume{configMapVolume("v", "a"), configMapVolume("w", "")},
			Containers: []corev1.Container{{Name: "app", EnvFrom: envFrom("a")}},
		}, []PodConfigMapUse{{Name: "a", Volume: "v"}, {Name: "", Volume: "w"}, {Name: "a", Container: "app", ContainerKind: RegularContainer}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []PodConfigMapUse
			if !VisitPodConfigMaps(&corev1.Pod{Spec: tt.spec}, func(use PodConfigMapUse) bool {
				got = append(got, use)
				return true
			}) {
				t.Error("VisitPodConfigMaps returned false, though every visit returned true")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("visited %+v, want %+v", got, tt.want)
			}
			// Stopping at each use visits exactly the uses up to it.
			for stop := range tt.want {
				var seen int
				if VisitPodConfigMaps(&corev1.Pod{Spec: tt.spec}, func(PodConfigMapUse) bool {
					seen++
					return seen <= stop
				}) {
					t.Errorf("stopping at use %d: VisitPodConfigMaps returned true", stop)
				}
				if seen != stop+1 {
					t.Errorf("stopping at use %d: visited %d", stop, seen)
				}
			}
		})
	}
}

func TestContainerKindString(t *testing.T) {
	for kind, want := range map[ContainerKind]string{InitContainer: "init container", RegularContainer: "container", EphemeralContainer: "ephemeral container"} {
		if got := kind.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", kind, got, want)
		}
	}
}
