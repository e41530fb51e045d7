// Package repocheck holds the repository's own rules as tests: the import
// layering of both modules (see Rules) and the completeness of `make fuzz`.
// It has no production code; its tests run `go list` over the module the way
// Kubernetes' import-boss checks its import rules.
package repocheck
