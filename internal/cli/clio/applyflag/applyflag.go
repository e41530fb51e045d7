// Package applyflag registers the flags that say how a change set is
// carried out, for `gpupack apply` and `serve --apply-controller`, and
// turns them into app.ApplyOptions and the Kubernetes actuator.
package applyflag

import (
	"fmt"
	"io"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/gpupack/gpupack/gpu"
	actuator "github.com/gpupack/gpupack/internal/actuator/kube"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/plan"
)

// Flags are the flags' values.
type Flags struct {
	ApprovedBy  string
	MaxPerPool  int
	Drain       time.Duration
	Switch      time.Duration
	LetJobs     bool
	RequireMIG  bool
	Maintenance string
	MIGParted   string
	DevPlugin   string
}

// Add registers the flags into f.
func Add(f *pflag.FlagSet, o *Flags) {
	def := app.DefaultApplyOptions()
	f.IntVar(&o.MaxPerPool, "max-per-pool", def.MaxPerPool, "nodes of one pool that change at once")
	f.DurationVar(&o.Drain, "drain-timeout", def.DrainTimeout, "how long a node's drain may wait for PodDisruptionBudgets before its change is aborted")
	f.DurationVar(&o.Switch, "switch-timeout", def.SwitchTimeout, "how long to wait for mig-manager and the device plugin after the switch (and again for a rollback)")
	f.BoolVar(&o.LetJobs, "let-jobs-finish", false, "wait for the pods of Jobs to finish (within --drain-timeout) instead of evicting them")
	f.BoolVar(&o.RequireMIG, "require-mig-manager", def.RequireMIGManager, "refuse a MIG change on a node where mig-manager is not deployed (nvidia.com/gpu.deploy.mig-manager=true) and at rest (nvidia.com/mig.config.state=success)")
	f.StringVar(&o.Maintenance, "maintenance-window", "", "start node changes only in this daily window, HH:MM-HH:MM in UTC (e.g. 22:00-06:00)")
	f.StringVar(&o.MIGParted, "mig-config-map", "gpu-operator/custom-mig-config:config.yaml", "NAMESPACE/NAME:KEY of the mig-parted config mig-manager reads (the GPU operator's migManager.config.name)")
	f.StringVar(&o.DevPlugin, "device-plugin-config-map", plan.ConfigMapNamespace+"/"+plan.ConfigMapName, "NAMESPACE/NAME of the device plugin's named configs (the GPU operator's devicePlugin.config.name)")
}

// Options turns the flags into app.ApplyOptions, with progress lines
// written to log.
func (o *Flags) Options(log io.Writer) (app.ApplyOptions, error) {
	ao := app.DefaultApplyOptions()
	ao.MaxPerPool, ao.DrainTimeout, ao.SwitchTimeout = o.MaxPerPool, o.Drain, o.Switch
	ao.LetJobsFinish, ao.RequireMIGManager = o.LetJobs, o.RequireMIG
	ao.ApprovedBy = o.ApprovedBy
	if ao.ApprovedBy == "" {
		if u, err := user.Current(); err == nil {
			ao.ApprovedBy = u.Username
		}
	}
	if o.Maintenance != "" {
		w, err := app.ParseMaintenanceWindow(o.Maintenance)
		if err != nil {
			return ao, fmt.Errorf("--maintenance-window: %w", err)
		}
		ao.Window = w
	}
	ao.Progress = func(s app.Step) {
		line := fmt.Sprintf("%s %s: %s", s.At.UTC().Format(time.TimeOnly), s.Node, s.Name)
		if s.Detail != "" {
			line += ": " + s.Detail
		}
		fmt.Fprintln(log, line)
	}
	return ao, nil
}

// Actuator is the Kubernetes actuator of the flags' ConfigMaps.
func (o *Flags) Actuator(client kubernetes.Interface, c *gpu.Catalogue, component string) (*actuator.Actuator, error) {
	mig, err := ParseConfigMapRef(o.MIGParted, true)
	if err != nil {
		return nil, fmt.Errorf("--mig-config-map: %w", err)
	}
	dp, err := ParseConfigMapRef(o.DevPlugin, false)
	if err != nil {
		return nil, fmt.Errorf("--device-plugin-config-map: %w", err)
	}
	return &actuator.Actuator{Client: client, Catalogue: c, MIGParted: mig, DevicePlugin: dp, Component: component}, nil
}

// ParseConfigMapRef reads NAMESPACE/NAME, and :KEY when wantKey.
func ParseConfigMapRef(s string, wantKey bool) (actuator.ConfigMapRef, error) {
	ref, key, hasKey := strings.Cut(s, ":")
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || (wantKey && (!hasKey || key == "")) || (!wantKey && hasKey) {
		want := "NAMESPACE/NAME"
		if wantKey {
			want += ":KEY"
		}
		return actuator.ConfigMapRef{}, fmt.Errorf("%q: want %s", s, want)
	}
	return actuator.ConfigMapRef{Namespace: ns, Name: name, Key: key}, nil
}
