// Package e2e holds gpupack's end-to-end tests against real components
// (Debian's prometheus binary). It has no code outside its tests.
package e2e
