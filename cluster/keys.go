package cluster

import (
	"fmt"
	"strings"
)

// PodKey names a pod by namespace and name. Its text form is
// "namespace/name" (Pod.Key), or the name alone for a pod without a
// namespace (a trace's). It is comparable, so it serves as a map key, and
// it marshals as that text, in JSON and YAML alike, as a value or a map
// key.
type PodKey struct {
	Namespace, Name string
}

// String is the key's text form: "namespace/name", or the name alone
// when the namespace is empty.
func (k PodKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// ParsePodKey reads a pod key's text form, "namespace/name" or a bare
// name: the name must be there and hold no slash, and a slash must have
// a namespace before it.
func ParsePodKey(s string) (PodKey, error) {
	ns, name, found := strings.Cut(s, "/")
	if !found {
		ns, name = "", s
	}
	if name == "" || strings.Contains(name, "/") || (found && ns == "") {
		return PodKey{}, fmt.Errorf("%q is not a pod key namespace/name", s)
	}
	return PodKey{Namespace: ns, Name: name}, nil
}

// MarshalText writes String.
func (k PodKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads what ParsePodKey reads.
func (k *PodKey) UnmarshalText(b []byte) error {
	key, err := ParsePodKey(string(b))
	if err != nil {
		return err
	}
	*k = key
	return nil
}

// DRADeviceID names a DRA device by its driver, pool and name in the pool.
// Its text form is "driver/pool/device" (DeviceID): the device's identity
// in a ResourceClaim's allocation and in a snapshot file. It is
// comparable, so it serves as a map key, and it marshals as that text.
type DRADeviceID struct {
	driver, pool, device string
}

// NewDRADeviceID is the ID of the device named device in the driver's
// pool.
func NewDRADeviceID(driver, pool, device string) DRADeviceID {
	return DRADeviceID{driver: driver, pool: pool, device: device}
}

// Driver is the device's DRA driver.
func (id DRADeviceID) Driver() string { return id.driver }

// Pool is the device's pool (its name may hold slashes).
func (id DRADeviceID) Pool() string { return id.pool }

// Device is the device's name in its pool.
func (id DRADeviceID) Device() string { return id.device }

// String is the ID's text form, "driver/pool/device".
func (id DRADeviceID) String() string { return id.driver + "/" + id.pool + "/" + id.device }

// SplitDRADeviceID splits "driver/pool/device" into its parts: the driver
// before the first slash, the device after the last, the pool (which may
// itself hold slashes) between. It takes any string, leaving the parts it
// does not find empty; ParseDRADeviceID checks them.
func SplitDRADeviceID(s string) DRADeviceID {
	driver, rest, _ := strings.Cut(s, "/")
	i := strings.LastIndex(rest, "/")
	if i < 0 {
		return DRADeviceID{driver: driver, device: rest}
	}
	return DRADeviceID{driver, rest[:i], rest[i+1:]}
}

// ParseDRADeviceID reads "driver/pool/device", none of the parts empty.
func ParseDRADeviceID(s string) (DRADeviceID, error) {
	id := SplitDRADeviceID(s)
	if id.driver == "" || id.pool == "" || id.device == "" {
		return DRADeviceID{}, fmt.Errorf("%q is not a DRA device ID driver/pool/device", s)
	}
	return id, nil
}

// MarshalText writes String.
func (id DRADeviceID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads what ParseDRADeviceID reads.
func (id *DRADeviceID) UnmarshalText(b []byte) error {
	parsed, err := ParseDRADeviceID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}
