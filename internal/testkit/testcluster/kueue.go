package testcluster

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// kueueCRDs are Kueue's own CRDs (kueue/README.md says whence).
//
//go:embed kueue/*.yaml
var kueueCRDs embed.FS

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Dynamic is a dynamic client as the administrator.
func (c *Cluster) Dynamic() dynamic.Interface {
	c.t.Helper()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		c.t.Fatalf("dynamic client: %v", err)
	}
	return dyn
}

// InstallCRDs creates the CustomResourceDefinitions and waits until the
// apiserver has established each.
func (c *Cluster) InstallCRDs(crds ...*unstructured.Unstructured) {
	c.t.Helper()
	ctx := context.Background()
	dyn := c.Dynamic()
	for _, crd := range crds {
		if _, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			c.t.Fatalf("create CRD %s: %v", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		name := crd.GetName()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, c.timeout, true, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			c.t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
}

// InstallKueueCRDs creates Kueue's Workload, LocalQueue, ClusterQueue and
// ResourceFlavor CRDs (sigs.k8s.io/kueue v0.17.0) and waits until the
// apiserver serves them. No Kueue controller runs: a test writes the
// objects' status itself.
func (c *Cluster) InstallKueueCRDs() {
	c.t.Helper()
	files, err := kueueCRDs.ReadDir("kueue")
	if err != nil {
		c.t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if !f.IsDir() && strings.HasSuffix(f.Name(), ".yaml") {
			names = append(names, "kueue/"+f.Name())
		}
	}
	crds := c.readCRDs(kueueCRDs, names...)
	c.InstallCRDs(crds...)
	// Discovery may lag the Established condition by a moment: wait until
	// the group's version lists every resource, as gpupack's loader looks
	// them up.
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, c.timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.client.Discovery().ServerResourcesForGroupVersion("kueue.x-k8s.io/v1beta2")
		if err != nil {
			return false, nil
		}
		return len(list.APIResources) >= len(crds), nil
	})
	if err != nil {
		c.t.Fatal(fmt.Errorf("kueue.x-k8s.io/v1beta2 not served: %w", err))
	}
}

// neighbourCRDs are KEDA's ScaledObject CRD and a mirror of Kubeflow's
// Notebook CRD (neighbours/README.md says whence).
//
//go:embed neighbours/*.yaml
var neighbourCRDs embed.FS

// InstallNeighbourCRDs creates KEDA's ScaledObject and Kubeflow's Notebook
// CRDs and waits until the apiserver serves them. No KEDA operator or
// notebook controller runs.
func (c *Cluster) InstallNeighbourCRDs() {
	c.t.Helper()
	c.InstallCRDs(c.readCRDs(neighbourCRDs, "neighbours/keda.sh_scaledobjects.yaml", "neighbours/kubeflow.org_notebooks.yaml")...)
	for _, gv := range []string{"keda.sh/v1alpha1", "kubeflow.org/v1"} {
		c.waitServed(gv)
	}
}

// readCRDs reads the CRDs at paths of fsys (the CRDs embedded beside the
// test kit).
func (c *Cluster) readCRDs(fsys embed.FS, paths ...string) []*unstructured.Unstructured {
	c.t.Helper()
	var crds []*unstructured.Unstructured
	for _, p := range paths {
		data, err := fsys.ReadFile(p)
		if err != nil {
			c.t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			c.t.Fatalf("%s: %v", p, err)
		}
		crds = append(crds, &unstructured.Unstructured{Object: crd})
	}
	return crds
}
