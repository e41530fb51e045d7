package cluster

import (
	"fmt"
	"strings"
)

// checkV1Alpha1 rejects the fields that v1alpha1 files do not have, so that
// a file mixing versions says which version it needs.
func (f *File) checkV1Alpha1() error {
	for i, n := range f.Nodes {
		for j, g := range n.GPUs {
			if g.DRA != nil {
				return fmt.Errorf("nodes[%d].gpus[%d].dra: DRA devices need apiVersion %s; this file says %s", i, j, FileAPIVersion, FileAPIVersionV1Alpha1)
			}
		}
	}
	for i, p := range f.Pods {
		if len(p.Claims) > 0 {
			return fmt.Errorf("pods[%d].claims: ResourceClaims need apiVersion %s; this file says %s", i, FileAPIVersion, FileAPIVersionV1Alpha1)
		}
	}
	return nil
}

// checkDRADevice validates a file GPU group's DRA identity.
func checkDRADevice(d *DRADevice, count int, sharing Sharing, slices int) error {
	switch {
	case count != 1:
		return fmt.Errorf("a DRA device is one GPU; count is %d (give one group per device)", count)
	case d.Driver == "":
		return fmt.Errorf("driver: missing (e.g. gpu.nvidia.com)")
	case d.Pool == "":
		return fmt.Errorf("pool: missing")
	case d.Device == "" && len(d.SliceDevices) == 0 && len(d.Partitions) == 0:
		return fmt.Errorf("device: missing (the device name in the ResourceSlice, e.g. gpu-0)")
	case len(d.SliceDevices) > 0 && sharing != MIG:
		return fmt.Errorf("sliceDevices: given but sharing is %s; only MIG GPUs have slices", sharing)
	case sharing == MIG && len(d.SliceDevices) != slices:
		return fmt.Errorf("sliceDevices: %d names for %d MIG slices; give one device name per slice of mig, in order", len(d.SliceDevices), slices)
	case d.Partitionable() && sharing == MIG:
		return fmt.Errorf("counterSets: given for a GPU with a MIG layout; a partitionable GPU's MIG devices are its partitions")
	}
	if err := checkPartitions(d); err != nil {
		return err
	}
	if err := checkCapacities(d.Capacity); err != nil {
		return err
	}
	for i, name := range d.Names() {
		if name == "" || strings.ContainsAny(name, "/ \t\n") {
			return fmt.Errorf("device name %d: %q is not a DRA device name (no slash or space, not empty)", i, name)
		}
	}
	return checkTaints(d)
}

// checkClaim validates a pod's claim in a file.
func checkClaim(c *Claim) error {
	if (c.PodClaim == "") == (c.ExtendedResource == "") {
		return fmt.Errorf("podClaim: give exactly one of podClaim (the entry's name in the pod's spec.resourceClaims) and extendedResource (the resource a DeviceClass's extendedResourceName serves)")
	}
	for i := range c.Requests {
		if err := checkClaimRequest(&c.Requests[i], true); err != nil {
			return fmt.Errorf("requests[%d]: %w", i, err)
		}
	}
	for i := range c.Constraints {
		if err := checkConstraint(c, &c.Constraints[i]); err != nil {
			return fmt.Errorf("constraints[%d]: %w", i, err)
		}
	}
	for i, d := range c.Allocated {
		switch {
		case d.Request == "":
			return fmt.Errorf("allocated[%d].request: missing", i)
		case d.Driver == "" || d.Pool == "" || d.Device == "":
			return fmt.Errorf("allocated[%d]: driver, pool and device are all needed; got %q", i, d.ID())
		}
		for name, q := range d.ConsumedCapacity {
			if _, err := ParseQuantity(q); err != nil {
				return fmt.Errorf("allocated[%d].consumedCapacity.%s: %w", i, name, err)
			}
		}
	}
	if c.Missing && (len(c.Requests) > 0 || len(c.Allocated) > 0) {
		return fmt.Errorf("missing: a claim that does not exist has no requests or allocation")
	}
	if len(c.Allocated) > 0 && c.Name == "" {
		return fmt.Errorf("name: missing for an allocated claim (the ResourceClaim's name)")
	}
	return nil
}

// checkConstraint validates a claim's constraint: one attribute, and
// requests the claim has.
func checkConstraint(c *Claim, k *ClaimConstraint) error {
	if (k.MatchAttribute == "") == (k.DistinctAttribute == "") {
		return fmt.Errorf("give exactly one of matchAttribute and distinctAttribute")
	}
	if a := k.Attribute(); !strings.Contains(a, "/") {
		return fmt.Errorf("attribute %q: want a fully qualified name (domain/name, e.g. resource.kubernetes.io/pcieRoot)", a)
	}
	for _, name := range k.Requests {
		base, _, _ := strings.Cut(name, "/")
		found := false
		for i := range c.Requests {
			found = found || c.Requests[i].Name == base
		}
		if !found {
			return fmt.Errorf("requests: %q names no request of the claim", name)
		}
	}
	if len(k.Values) > 0 && !k.Evaluated {
		return fmt.Errorf("values: given without evaluated: true")
	}
	return nil
}

func checkClaimRequest(r *ClaimRequest, top bool) error {
	if r.Name == "" {
		return fmt.Errorf("name: missing")
	}
	if r.Count < 0 || r.Count > 64 {
		return fmt.Errorf("count: %d (want 1..64, or all: true)", r.Count)
	}
	if len(r.FirstAvailable) > 0 {
		if !top {
			return fmt.Errorf("firstAvailable: alternatives cannot nest")
		}
		if r.DeviceClass != "" || r.Count != 0 || r.All || len(r.Selectors) > 0 || len(r.Tolerations) > 0 || len(r.Capacity) > 0 || r.Evaluated || len(r.Accepts) > 0 || len(r.SelectorErrors) > 0 {
			return fmt.Errorf("firstAvailable: a request with alternatives has no deviceClass, count, all, selectors, tolerations, capacity or evaluation of its own (each alternative has them)")
		}
		for i := range r.FirstAvailable {
			if err := checkClaimRequest(&r.FirstAvailable[i], false); err != nil {
				return fmt.Errorf("firstAvailable[%d]: %w", i, err)
			}
		}
		return nil
	}
	if r.DeviceClass == "" {
		return fmt.Errorf("deviceClass: missing")
	}
	if err := checkTolerations(r.Tolerations); err != nil {
		return err
	}
	if r.All && r.Count != 0 {
		return fmt.Errorf("all: a request for all matching devices has no count")
	}
	if !r.All && r.Count == 0 {
		return fmt.Errorf("count: missing (want 1..64, or all: true)")
	}
	if !r.Evaluated && (len(r.Accepts) > 0 || len(r.SelectorErrors) > 0) {
		return fmt.Errorf("accepts: given for a request that is not evaluated; set evaluated: true")
	}
	for i, id := range r.Accepts {
		if err := checkDeviceID(id); err != nil {
			return fmt.Errorf("accepts[%d]: %w", i, err)
		}
	}
	for id, msg := range r.SelectorErrors {
		if err := checkDeviceID(id); err != nil {
			return fmt.Errorf("selectorErrors: %w", err)
		}
		if msg == "" {
			return fmt.Errorf("selectorErrors.%s: the error is empty", id)
		}
	}
	return nil
}

// checkDeviceID checks a DeviceID: driver/pool/device, none empty (a pool
// name may itself have slashes).
func checkDeviceID(id string) error {
	_, err := ParseDRADeviceID(id)
	return err
}

// checkDRA checks that no DRA device is offered twice in the snapshot.
func checkDRA(s *Snapshot) error {
	seen := map[string]string{}
	for _, n := range s.Nodes {
		for i, g := range n.GPUs {
			if g.DRA == nil {
				continue
			}
			for _, name := range g.DRA.Names() {
				id := DeviceID(g.DRA.Driver, g.DRA.Pool, name)
				where := fmt.Sprintf("node %s GPU %d", n.Name, i)
				if prev, dup := seen[id]; dup {
					return fmt.Errorf("DRA device %s is offered twice: by %s and by %s", id, prev, where)
				}
				seen[id] = where
			}
		}
	}
	return nil
}
