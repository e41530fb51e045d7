package serve

import "github.com/gpupack/gpupack/internal/app"

// Provider keeps an app.View current.
type Provider interface {
	// View returns the latest app.View; nil before the first refresh. It must
	// not block, and the View it returns must not change afterwards.
	View() *app.View
	// Ready returns nil when the provider serves current data, otherwise
	// why not ("Prometheus http://...: connection refused"). It must not
	// block.
	Ready() error
}
