// Package gpu is gpupack's catalogue of GPU models: memory, MIG capability,
// MIG profiles with their valid placements, and default hourly prices.
//
// It also owns the quantity types that the rest of gpupack shares (MiB of
// memory, milli-GPU fractions) so that units live in types, not in comments.
//
// gpu is a pure package: it must not import client-go, net/http or any CLI
// library.
package gpu
