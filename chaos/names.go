package chaos

import "slices"

// The accepted values of the suite's filters, for its command's help and
// errors: read from the registries, so that a topology, fault or fencing
// mode added there is listed without touching the command. FaultNames is
// in fault.go.

// TopologyNames returns the names of the topologies, in report order.
func TopologyNames() []string { return slices.Clone(allTopologies) }

// FencingModes returns the names of the fencing modes, in report order.
func FencingModes() []string { return slices.Clone(fencingModes) }
